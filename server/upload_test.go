package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
)

// collector is a decision-log collector on loopback as OPA's plugin
// uploads to: gzip'd JSON arrays of events POSTed to /logs. While down it
// answers 503 and keeps nothing.
type collector struct {
	url  string
	down atomic.Bool
	mu   sync.Mutex
	seen map[string]int // decision id → times received
	evs  []map[string]any
	// refused counts the uploads answered 503.
	refused atomic.Int64
}

func newCollector(t testing.TB) *collector {
	t.Helper()
	c := &collector{seen: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(c.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c.url = "http://" + ln.Addr().String()
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "not an upload", http.StatusBadRequest)
		return
	}
	if c.down.Load() {
		c.refused.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var evs []map[string]any
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&evs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, ev := range evs {
		id, _ := ev["decision_id"].(string)
		c.seen[id]++
		c.evs = append(c.evs, ev)
	}
	c.mu.Unlock()
}

// received is how many distinct decisions arrived, and whether any twice.
func (c *collector) received() (distinct int, dup string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.seen {
		if n > 1 {
			dup = id
		}
	}
	return len(c.seen), dup
}

// uploadConfig is the seed's configuration shipping its decisions to url,
// uploaded every second.
func uploadConfig(t *testing.T, url string, mutate func(*config.DecisionUpload)) *config.Config {
	t.Helper()
	return seed(t, func(c *config.Config) {
		c.DecisionLog.Upload = &config.DecisionUpload{URL: url, Resource: config.DefaultUploadResource, MinDelay: time.Second, MaxDelay: time.Second,
			BufferBytes: config.DefaultUploadBufferBytes, ChunkBytes: config.DefaultUploadChunkBytes, Queue: config.DefaultUploadQueue}
		if mutate != nil {
			mutate(c.DecisionLog.Upload)
		}
	})
}

// sends makes n requests through s, by the seed's bench token's caller
// (payments-investigator for user u-42), and returns their decision ids.
func sends(t *testing.T, s *Server, n int) []string {
	t.Helper()
	tok, err := os.ReadFile("testdata/identity/bench_token.txt")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range n {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", strings.NewReader(sendBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ids = append(ids, resp.Header.Get("Writ-Decision-Id"))
	}
	return ids
}

// TestUploadExactlyOnceAcrossAnOutage: every decision reaches the
// collector once, in OPA's event shape, across an outage shorter than the
// buffer (the failed uploads keep their batch); masked members never leave
// the host and each event says what was erased.
func TestUploadExactlyOnceAcrossAnOutage(t *testing.T) {
	col := newCollector(t)
	cfg := uploadConfig(t, col.url, func(u *config.DecisionUpload) { u.Mask = []string{"/input/caller/user_id"} })
	s, err := New(t.Context(), cfg, WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	ids := sends(t, s, 20)
	waitFor(t, "the first 20 decisions", func() bool { n, _ := col.received(); return n == 20 })
	col.down.Store(true)
	ids = append(ids, sends(t, s, 30)...)
	waitFor(t, "an upload refused", func() bool { return col.refused.Load() >= 2 })
	col.down.Store(false)
	ids = append(ids, sends(t, s, 10)...)
	waitFor(t, "all 60 decisions", func() bool { n, _ := col.received(); return n == 60 })
	resp, err := http.Get(s.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`writ_decision_log_uploads_total{result="failed"} `, `writ_decision_log_upload_dropped_total{reason="queue"} 0`} {
		if !strings.Contains(string(scrape), want) || strings.Contains(string(scrape), `writ_decision_log_uploads_total{result="failed"} 0`) {
			t.Errorf("metrics: no %s (or no failed upload counted)", want)
		}
	}
	shutdown(t, s)
	n, dup := col.received()
	if n != 60 || dup != "" {
		t.Fatalf("%d decisions received, %q twice", n, dup)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, id := range ids {
		if col.seen[id] != 1 {
			t.Errorf("decision %s received %d times", id, col.seen[id])
		}
	}
	for _, ev := range col.evs {
		in, _ := ev["input"].(map[string]any)
		caller, _ := in["caller"].(map[string]any)
		erased, _ := ev["erased"].([]any)
		if ev["path"] != "writ/authz/decision" || ev["result"] == nil || ev["labels"] == nil {
			t.Fatalf("not OPA's event shape: %v", ev)
		}
		if _, ok := caller["user_id"]; ok || caller["agent_id"] != "payments-investigator" || len(erased) != 1 || erased[0] != "/input/caller/user_id" {
			t.Fatalf("the masked member left the host: caller %v, erased %v", caller, erased)
		}
	}
	if st := s.fleet.Stats(); st.ChunksFailed == 0 || st.ChunksUploaded == 0 || st.Dropped+st.BufferDrops+st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestUploadCountsDropsAfterALongOutage: an outage that outlasts the
// buffer drops the oldest batches, counted; the decisions after it are
// shipped.
func TestUploadCountsDropsAfterALongOutage(t *testing.T) {
	col := newCollector(t)
	col.down.Store(true)
	cfg := uploadConfig(t, col.url, func(u *config.DecisionUpload) { u.BufferBytes, u.ChunkBytes = 2048, 1024 })
	s, err := New(t.Context(), cfg, WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	for range 10 {
		sends(t, s, 40)
		if s.fleet.Stats().BufferDrops > 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, "a buffer drop", func() bool { return s.fleet.Stats().BufferDrops > 0 })
	col.down.Store(false)
	after := sends(t, s, 5)
	waitFor(t, "the decisions after the outage", func() bool {
		col.mu.Lock()
		defer col.mu.Unlock()
		for _, id := range after {
			if col.seen[id] == 0 {
				return false
			}
		}
		return true
	})
	if n, _ := col.received(); n >= 400 {
		t.Errorf("%d of 400+ decisions received: nothing was dropped", n)
	}
}

// BenchmarkDecisionUpload: one request decided through a real writ (the
// seed's configuration, the bench token's caller), with decision_log.upload
// off and on (to a collector on loopback, uploading every second), in the
// same run: the upload's cost per decision.
func BenchmarkDecisionUpload(b *testing.B) {
	for _, mode := range []string{"off", "upload"} {
		b.Run(mode, func(b *testing.B) {
			col := newCollector(b)
			cfg := seed(b, func(c *config.Config) {
				if mode == "upload" {
					c.DecisionLog.Upload = &config.DecisionUpload{URL: col.url, Resource: config.DefaultUploadResource, MinDelay: time.Second,
						MaxDelay: time.Second, BufferBytes: config.DefaultUploadBufferBytes, ChunkBytes: config.DefaultUploadChunkBytes,
						Queue: config.DefaultUploadQueue}
				}
			})
			tok, err := os.ReadFile("testdata/identity/bench_token.txt")
			if err != nil {
				b.Fatal(err)
			}
			s, err := New(b.Context(), cfg, WithLogger(quiet()))
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Shutdown(context.Background()) }()
			client := &http.Client{}
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", strings.NewReader(sendBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
