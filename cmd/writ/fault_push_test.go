package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/devidp"
)

// pushSink is a push receiver on loopback that records what arrives, and
// can hang (hold every request until released) or be down (its port
// closed) and come back on the same port.
type pushSink struct {
	t        *testing.T
	addr     string
	srv      *http.Server
	hang     chan struct{} // closed: requests are answered; nil: never held
	inFlight atomic.Int64
	peak     atomic.Int64
	mu       sync.Mutex
	bodies   []string
}

func newPushSink(t *testing.T, hanging bool) *pushSink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &pushSink{t: t, addr: ln.Addr().String()}
	if hanging {
		s.hang = make(chan struct{})
	}
	s.serve(ln)
	t.Cleanup(func() { s.release(); _ = s.srv.Close() })
	return s
}

func (s *pushSink) url() string { return "http://" + s.addr + "/cb" }

func (s *pushSink) serve(ln net.Listener) {
	s.srv = &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		b, _ := io.ReadAll(r.Body)
		if s.hang != nil {
			select {
			case <-s.hang:
			case <-r.Context().Done():
				return
			}
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
	})}
	go func() { _ = s.srv.Serve(ln) }()
}

// down closes the port; up opens it again.
func (s *pushSink) down() { _ = s.srv.Close() }

func (s *pushSink) up() { s.serve(relisten(s.t, s.addr, "receiver")) }

func (s *pushSink) release() {
	if s.hang != nil {
		select {
		case <-s.hang:
		default:
			close(s.hang)
		}
	}
}

// has reports whether every task's notification arrived; never for no task
// or an empty id, which every body would match.
func (s *pushSink) has(ids []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		if id == "" {
			return false
		}
		found := false
		for _, b := range s.bodies {
			if strings.Contains(b, `"`+id+`"`) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func waitUntil(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// TestFaultPushReceiversDownAndHanging: one caller's push receiver hangs
// (accepts and never answers), another's is down (its port closed), while
// other callers' receivers work and traffic runs. Every send is answered at
// once as usual (push never holds an answer up); the working receivers get
// every notification while the hanging one still holds its attempts (it holds
// no more than its host's share of the workers); the down receiver's
// notifications are retried and arrive once it is back; the hanging one's
// arrive once it answers; no restart, and the goroutines come back.
func TestFaultPushReceiversDownAndHanging(t *testing.T) {
	w := startFaultWrit(t, fwOptions{extra: "push: {trusted_hosts: [127.0.0.1], workers: 4, attempt_timeout: 60s, max_attempts: 12}\n"})
	hanging, down, working := newPushSink(t, true), newPushSink(t, false), newPushSink(t, false)
	down.down()
	before := w.idleGoroutines(t)
	stop := w.steady(t, 2)

	caller := func(agent string) string {
		return w.tok(devidp.Caller{Agent: agent, User: "u-" + agent, Tenant: "wholesale", Classification: "internal", Scope: "delegate"})
	}
	type batch struct {
		sink  *pushSink
		token string
		ids   []string
	}
	batches := []*batch{{sink: hanging, token: caller("hang-bot")}, {sink: down, token: caller("down-bot")}}
	for i := range 3 {
		batches = append(batches, &batch{sink: working, token: caller(fmt.Sprintf("ok-bot-%d", i))})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, b := range batches {
		for k := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, body, err := w.send(t.Context(), b.token, map[string]any{"pushNotificationConfig": map[string]any{
					"url": b.sink.url(), "token": fmt.Sprintf("tok-%d", k)}})
				var r struct {
					Result struct {
						ID string `json:"id"`
					} `json:"result"`
				}
				if !completed(st, body, err) || json.Unmarshal(body, &r) != nil || r.Result.ID == "" {
					t.Errorf("a send with a push config: %d %v %s", st, err, body)
					return
				}
				mu.Lock()
				b.ids = append(b.ids, r.Result.ID)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	var ok []string
	for _, b := range batches[2:] {
		ok = append(ok, b.ids...)
	}
	waitUntil(t, "the working receivers' notifications, while one receiver hangs", 30*time.Second, func() bool { return working.has(ok) })
	if p := hanging.peak.Load(); p > 2 || p < 1 {
		t.Errorf("the hanging receiver held %d attempts at once; its host's share is 2 of 4 workers (and it was tried)", p)
	}
	if hanging.has(batches[0].ids[:1]) {
		t.Error("the hanging receiver answered before it was released")
	}
	waitUntil(t, "attempts to the down receiver failing and scheduled again", 30*time.Second, func() bool {
		m, err := w.Metrics()
		return err == nil && m.Sum("writ_push_attempts_total", `result="retry"`) >= 1
	})
	down.up()
	waitUntil(t, "the down receiver's notifications once it is back", 60*time.Second, func() bool { return down.has(batches[1].ids) })
	hanging.release()
	waitUntil(t, "the hanging receiver's notifications once it answers", 60*time.Second, func() bool { return hanging.has(batches[0].ids) })
	if n := stop(); n == 0 {
		t.Fatal("no traffic ran")
	}
	m, err := w.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Sum("writ_push_deliveries_total", `result="failed"`); f != 0 {
		t.Errorf("%v notifications given up", f)
	}
	w.settled(t, before)
}
