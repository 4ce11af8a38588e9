package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
)

// statusDoc is what the tests read of a status document (OPA's shape).
type statusDoc struct {
	Labels  map[string]string `json:"labels"`
	Bundles map[string]struct {
		Name           string `json:"name"`
		ActiveRevision string `json:"active_revision"`
		Code           string `json:"code"`
		Message        string `json:"message"`
	} `json:"bundles"`
	DecisionLogs *struct {
		Code string `json:"code"`
	} `json:"decision_logs"`
	Plugins map[string]struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"plugins"`
}

// statusService is a status service on loopback: it keeps every document
// POSTed to /status/<partition>.
type statusService struct {
	url  string
	mu   sync.Mutex
	docs []statusDoc
	bad  []string
}

func newStatusService(t *testing.T) *statusService {
	t.Helper()
	ss := &statusService{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var d statusDoc
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/status/edge-1" || json.Unmarshal(raw, &d) != nil {
			ss.bad = append(ss.bad, r.Method+" "+r.URL.Path+" "+string(raw))
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		ss.docs = append(ss.docs, d)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	ss.url = "http://" + ln.Addr().String()
	return ss
}

// last is the latest document received that cond holds for.
func (ss *statusService) seen(cond func(statusDoc) bool) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, d := range ss.docs {
		if cond(d) {
			return true
		}
	}
	return false
}

// TestStatusDocument: the status document, in OPA's shape, names this
// writ (its labels), the policy set serving (as the bundle "writ", its
// active revision the one deciding), writ's parts as plugins, and the
// decision-log upload's health; it is served at GET /v1/status and
// uploaded to the status service on every change: a refused bundle shows
// as the set's bundle_error while the last good revision stays active.
func TestStatusDocument(t *testing.T) {
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	ss := newStatusService(t)
	col := newCollector(t)
	cfg := bundleConfig(t, bs.url, "", nil)
	cfg.Status = &config.Status{URL: ss.url, PartitionName: "edge-1"}
	cfg.Labels = map[string]string{"cluster": "dxb-1"}
	cfg.DecisionLog.Upload = &config.DecisionUpload{URL: col.url, Resource: config.DefaultUploadResource, MinDelay: time.Second,
		MaxDelay: time.Second, BufferBytes: config.DefaultUploadBufferBytes, ChunkBytes: config.DefaultUploadChunkBytes, Queue: config.DefaultUploadQueue}
	s, err := New(t.Context(), cfg, WithLogger(quiet()), WithVersion("v9.9.9-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	live := s.Engine().Revision()
	waitFor(t, "the status with the live revision", func() bool {
		return ss.seen(func(d statusDoc) bool { return d.Bundles["writ"].ActiveRevision == live })
	})

	resp, err := http.Get(s.AdminURL() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var doc statusDoc
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/status: %d %v", resp.StatusCode, err)
	}
	if doc.Labels["app"] != "writ" || doc.Labels["cluster"] != "dxb-1" || doc.Labels["writ_version"] != "v9.9.9-test" || doc.Labels["id"] == "" {
		t.Errorf("labels %v", doc.Labels)
	}
	if b := doc.Bundles["writ"]; b.ActiveRevision != live || b.Code != "" || !strings.Contains(b.Message, bs.url) {
		t.Errorf("bundles.writ %+v, want active %s from %s", b, live, bs.url)
	}
	for _, part := range []string{"writ_store", "writ_decision_log", "writ_identity", "writ_sidecar", "writ_admin", "decision_logs", "status"} {
		if st := doc.Plugins[part]; st.State != "OK" {
			t.Errorf("plugin %s: %+v (plugins %v)", part, st, doc.Plugins)
		}
	}

	// A refused bundle: the set's error, the last good revision active.
	bs.set(bundleSpec{rev: "r2", testWants: "not-r2"}.build(t))
	waitFor(t, "the status of a refused bundle", func() bool {
		return ss.seen(func(d statusDoc) bool {
			b := d.Bundles["writ"]
			return b.Code == "bundle_error" && strings.Contains(b.Message, "policy tests failed") && b.ActiveRevision == live
		})
	})
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.bad) > 0 {
		t.Errorf("the status service got %v", ss.bad)
	}
}
