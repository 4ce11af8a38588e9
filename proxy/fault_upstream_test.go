package proxy_test

import (
	"bufio"
	"bytes"
	"context"
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

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/leakcheck"
	"github.com/writ-authz/writ/internal/proxytest"
)

// Fault tests of the upstream (docs/soak-and-faults.md): an agent killed in the middle
// of a stream, an agent too slow to answer, an agent answering garbage or an
// endless SSE line. Each runs the sidecar in front of the faulty agent and a
// healthy one with steady traffic to the healthy one throughout, and checks:
// the affected requests get the documented protocol-shaped error, the others
// are untouched, nothing crashes, no goroutine is left behind (everything but
// HTTP connections' counted before and after), and the faulty agent is served
// again as soon as it behaves, with no restart of writ.

// faultyAgent is an A2A 1.0 JSON-RPC agent whose behaviour is switched by
// mode, and which can be killed and brought back on the same address.
type faultyAgent struct {
	t    *testing.T
	addr string
	mode atomic.Value // string
	srv  *http.Server
	// active counts handlers running: every one must end once its request does.
	active   sync.WaitGroup
	started  chan string // a held stream's task id, once its first event is out
	bombSent atomic.Int64
	bombDone chan struct{}
}

func newFaultyAgent(t *testing.T) *faultyAgent {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &faultyAgent{t: t, addr: ln.Addr().String(), started: make(chan string, 4), bombDone: make(chan struct{}, 4)}
	f.mode.Store("ok")
	f.serve(ln)
	t.Cleanup(func() { f.kill() })
	return f
}

func (f *faultyAgent) url() string { return "http://" + f.addr }

func (f *faultyAgent) serve(ln net.Listener) {
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
}

// kill is the agent's process dying: the listener and every connection close.
func (f *faultyAgent) kill() { _ = f.srv.Close() }

// revive brings the agent back on the same address.
func (f *faultyAgent) revive() {
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatalf("revive on %s: %v", f.addr, err)
	}
	f.serve(ln)
}

const (
	taskWorking   = `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"%s","contextId":"c-%s","status":{"state":"TASK_STATE_WORKING"}}}}`
	taskCompleted = `{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"%s","contextId":"c-%s","status":{"state":"TASK_STATE_COMPLETED"}}}}`
)

var taskSeq atomic.Int64

func (f *faultyAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.active.Add(1)
	defer f.active.Done()
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &req)
	id := fmt.Sprintf("ft-%d", taskSeq.Add(1))
	stream := req.Method == "SendStreamingMessage"
	fl, _ := w.(http.Flusher)
	sse := func(format string) {
		fmt.Fprintf(w, "data: "+format+"\n\n", id, id)
		fl.Flush()
	}
	switch mode := f.mode.Load().(string); {
	case mode == "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	case mode == "garbage":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "<html><body>502 Bad Gateway (nginx)</body></html>")
	case mode == "garbage-rpc":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":42,"status":"done"}}}`)
	case stream && mode == "hold":
		w.Header().Set("Content-Type", "text/event-stream")
		sse(taskWorking)
		f.started <- id
		<-r.Context().Done() // until the agent is killed
	case stream && mode == "bomb":
		w.Header().Set("Content-Type", "text/event-stream")
		sse(taskWorking)
		_, _ = io.WriteString(w, "data: ")
		chunk := bytes.Repeat([]byte("A"), 32<<10)
		for f.bombSent.Load() < 256<<20 { // one line, no end, until writ hangs up
			n, err := w.Write(chunk)
			f.bombSent.Add(int64(n))
			if err != nil {
				break
			}
		}
		f.bombDone <- struct{}{}
	case stream:
		w.Header().Set("Content-Type", "text/event-stream")
		sse(taskWorking)
		sse(taskCompleted)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"%s","contextId":"c-%s","status":{"state":"TASK_STATE_COMPLETED"}}}}`, id, id)
	}
}

// faultWorld is the sidecar in front of the faulty agent (route /) and a
// healthy one (route /ok).
type faultWorld struct {
	*proxytest.Harness
	bad   *faultyAgent
	token string
}

func newFaultWorld(t *testing.T, mutate func(*config.Config)) *faultWorld {
	bad := newFaultyAgent(t)
	good := proxytest.NewFakeAgent(t, nil)
	healthy := proxytest.SanctionsAgent(good.Srv.URL)
	healthy.Name, healthy.Route = "healthy-agent", "/ok"
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(bad.url()), healthy}, mutate)
	return &faultWorld{Harness: h, bad: bad, token: h.Token(proxytest.Investigator)}
}

// call sends one 1.0 JSON-RPC request without touching t (safe off the test
// goroutine) and returns the status and the body.
func (w *faultWorld) call(ctx context.Context, path, method string) (int, []byte, error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": proxytest.SendParams})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.Srv.URL+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// steady sends to the healthy agent until stop is called, and fails the test
// if any answer is not the completed task.
func (w *faultWorld) steady(t *testing.T) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				st, body, err := w.call(ctx, "/ok/", "SendMessage")
				if ctx.Err() != nil {
					return
				}
				if err != nil || st != 200 || !bytes.Contains(body, []byte("TASK_STATE_COMPLETED")) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%d %v %.200s", st, err, body))
					mu.Unlock()
				}
				n.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	return func() int {
		cancel()
		wg.Wait()
		for _, b := range bad {
			t.Errorf("a request to the healthy agent was affected: %s", b)
		}
		return int(n.Load())
	}
}

// baseline warms both routes up and counts goroutines.
func (w *faultWorld) baseline(t *testing.T) int {
	for _, p := range []string{"/", "/ok/"} {
		if st, body, err := w.call(t.Context(), p, "SendMessage"); err != nil || st != 200 {
			t.Fatalf("warm-up %s: %d %v %s", p, st, err, body)
		}
	}
	return leakcheck.Count()
}

// recovered: the faulty agent, behaving again, is served with no restart.
func (w *faultWorld) recovered(t *testing.T) {
	t.Helper()
	w.bad.mode.Store("ok")
	st, body, err := w.call(t.Context(), "/", "SendMessage")
	if err != nil || st != 200 || !bytes.Contains(body, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("after the fault, the agent's answer does not get through: %d %v %s", st, err, body)
	}
	st, body, err = w.call(t.Context(), "/", "SendStreamingMessage")
	if err != nil || st != 200 || !bytes.Contains(body, []byte("TASK_STATE_COMPLETED")) {
		t.Fatalf("after the fault, the agent's stream does not get through: %d %v %s", st, err, body)
	}
}

// noLeak: every handler of the faulty agent ended, and the process has no
// more goroutines (besides HTTP connections') than before the fault.
func (w *faultWorld) noLeak(t *testing.T, before int) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.bad.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("a request to the faulty agent is still running: writ did not let go of it")
	}
	http.DefaultClient.CloseIdleConnections()
	leakcheck.Settle(t, before, 10*time.Second)
}

// sseEvents reads an SSE body into its data lines.
func sseEvents(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// TestFaultUpstreamKilledMidStream: the agent dies while a stream is open.
// The caller gets the events sent before, then the protocol's error event
// (UPSTREAM_UNAVAILABLE) and the end of the stream; requests while it is down
// are 502 UPSTREAM_UNAVAILABLE; the other agent's traffic never notices; the
// agent back on its address is served at once.
func TestFaultUpstreamKilledMidStream(t *testing.T) {
	w := newFaultWorld(t, nil)
	before := w.baseline(t)
	stop := w.steady(t)

	w.bad.mode.Store("hold")
	type answer struct {
		st   int
		body []byte
		err  error
	}
	streams := make(chan answer, 3)
	for range 3 {
		go func() {
			st, body, err := w.call(context.Background(), "/", "SendStreamingMessage")
			streams <- answer{st, body, err}
		}()
	}
	for range 3 {
		select {
		case <-w.bad.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the held streams did not start")
		}
	}
	w.bad.kill()
	for range 3 {
		a := <-streams
		evs := sseEvents(a.body)
		if a.err != nil || a.st != 200 || len(evs) != 2 || !strings.Contains(evs[0], "TASK_STATE_WORKING") ||
			!strings.Contains(evs[1], `"code":-32603`) || !strings.Contains(evs[1], "UPSTREAM_UNAVAILABLE") {
			t.Errorf("a stream cut by the agent's death: %d %v\n%s", a.st, a.err, a.body)
		}
	}
	// While it is down: 502, protocol-shaped.
	status, ans := w.RPC("/", w.token, "1.0", "SendMessage", proxytest.SendParams)
	if status != 502 || ans.Error == nil || ans.Error.Code != -32603 || !contains(ans.Reasons(), "UPSTREAM_UNAVAILABLE") {
		t.Errorf("a send while the agent is down: %d %s", status, ans.Raw)
	}
	w.bad.revive()
	w.recovered(t)
	if n := stop(); n == 0 {
		t.Error("no steady traffic ran")
	}
	w.noLeak(t, before)
}

// TestFaultUpstreamSlow: an agent slower than limits.upstream_timeout. Each
// request waiting on it is answered 504 UPSTREAM_TIMEOUT at the deadline and
// writ cancels its upstream request; the other agent's traffic goes on.
func TestFaultUpstreamSlow(t *testing.T) {
	w := newFaultWorld(t, func(c *config.Config) { c.Limits.UpstreamTimeout = 300 * time.Millisecond })
	before := w.baseline(t)
	stop := w.steady(t)
	w.bad.mode.Store("slow")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body, err := w.call(context.Background(), "/", "SendMessage")
			if err != nil || st != 504 || !bytes.Contains(body, []byte("UPSTREAM_TIMEOUT")) || !bytes.Contains(body, []byte(`"code":-32603`)) {
				t.Errorf("a send to the slow agent: %d %v %s", st, err, body)
			}
		}()
	}
	wg.Wait()
	w.recovered(t)
	stop()
	w.noLeak(t, before)
}

// TestFaultUpstreamGarbage: an agent answering what is not an A2A answer
// (an HTML error page, JSON of the wrong shape). The caller gets the
// protocol's INVALID_AGENT_RESPONSE error instead (proxy/plan.go), as for an
// invalid event inside a stream (TestMalformedStreamLine, and the line bomb
// below): none of the answer reaches the caller, nothing of it is recorded,
// and it is counted invalid (writ_upstream_invalid_responses_total). The
// other agent's traffic goes on.
func TestFaultUpstreamGarbage(t *testing.T) {
	w := newFaultWorld(t, nil)
	var invalid atomic.Int64
	w.Bus.Subscribe(invalidCounter{&invalid})
	before := w.baseline(t)
	stop := w.steady(t)
	time.Sleep(50 * time.Millisecond) // the healthy agent's one task ("t-1") is recorded
	held, err := w.Store.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, agentSaid string }{
		{"garbage", "502 Bad Gateway (nginx)"},
		{"garbage-rpc", `"id":42,"status":"done"`},
	} {
		w.bad.mode.Store(c.mode)
		for range 4 {
			st, body, err := w.call(t.Context(), "/", "SendMessage")
			if err != nil || st != 200 || !bytes.Contains(body, []byte("INVALID_AGENT_RESPONSE")) ||
				bytes.Contains(body, []byte(c.agentSaid)) {
				t.Errorf("%s: %d %v %s", c.mode, st, err, body)
			}
		}
	}
	if n := invalid.Load(); n != 8 {
		t.Errorf("%d answers counted invalid, want 8", n)
	}
	if now, err := w.Store.Stats(t.Context()); err != nil || now.Tasks != held.Tasks {
		t.Errorf("garbage answers changed the store: %d tasks before, %d after (%v)", held.Tasks, now.Tasks, err)
	}
	w.recovered(t)
	stop()
	w.noLeak(t, before)
}

// invalidCounter counts the invalid answers the sidecar reports.
type invalidCounter struct{ n *atomic.Int64 }

func (c invalidCounter) Decided(events.Decision) {}
func (c invalidCounter) TaskChanged(events.Task) {}
func (c invalidCounter) Pushed(events.Push)      {}
func (c invalidCounter) Served(r events.Request) { c.n.Add(int64(r.InvalidAnswers)) }

// TestFaultUpstreamSSELineBomb: an agent streaming one endless SSE line.
// writ reads no more than limits.max_event_bytes of it: the caller gets the
// events before, then the protocol's error event and the end of the stream,
// and writ hangs up on the agent (which stops writing) instead of buffering
// the line; the other agent's traffic goes on.
func TestFaultUpstreamSSELineBomb(t *testing.T) {
	w := newFaultWorld(t, func(c *config.Config) { c.Limits.MaxEventBytes = 64 << 10 })
	before := w.baseline(t)
	stop := w.steady(t)
	w.bad.mode.Store("bomb")
	st, body, err := w.call(t.Context(), "/", "SendStreamingMessage")
	evs := sseEvents(body)
	if err != nil || st != 200 || len(evs) != 2 || !strings.Contains(evs[0], "TASK_STATE_WORKING") ||
		!strings.Contains(evs[1], `"error"`) || len(body) > 16<<10 {
		t.Errorf("the bombed stream: %d %v, %d bytes:\n%.600s", st, err, len(body), body)
	}
	select {
	case <-w.bad.bombDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent is still writing its line: writ did not hang up")
	}
	// The agent wrote what the socket buffers took before writ hung up; writ
	// itself held at most max_event_bytes of it.
	t.Logf("the agent got %d KiB out before writ hung up (max_event_bytes 64 KiB; the rest sat in socket buffers)", w.bad.bombSent.Load()>>10)
	if sent := w.bad.bombSent.Load(); sent >= 256<<20 {
		t.Errorf("writ read the whole %d-byte line", sent)
	}
	w.recovered(t)
	stop()
	w.noLeak(t, before)
}
