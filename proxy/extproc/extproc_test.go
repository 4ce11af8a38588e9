package extproc_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
	"github.com/writ-authz/writ/task"
)

func deployment() door { return extprocDoor("ext_proc", nil) }

// TestForwardedHeaders: the agent sees writ's Writ-Caller, never the caller's
// in any spelling, and the answer carries the decision id.
func TestForwardedHeaders(t *testing.T) {
	w := newWorld(t, deployment(), nil)
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"x"}]}}}`)
	r := w.do("POST", "/", w.token(investigator), raw, map[string]string{"Writ-Caller": `{"agent_id":"forged"}`,
		"Writ_Caller": `{"agent_id":"forged"}`, "WRIT-DECISION-ID": "forged"})
	if r.status != 200 || len(r.header.Get("Writ-Decision-Id")) != 24 {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	reqs := w.agents["sanctions"].Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.Caller, `"agent_id":"payments-investigator"`) || strings.Contains(last.Caller, "forged") {
		t.Errorf("the agent saw Writ-Caller %q", last.Caller)
	}
	for k, v := range last.Header {
		if strings.Contains(strings.Join(v, ","), "forged") {
			t.Errorf("the agent saw %s: %v", k, v)
		}
	}
	if got := last.Header.Get("Writ-Decision-Id"); got != r.header.Get("Writ-Decision-Id") {
		t.Errorf("decision id upstream %q, to the caller %q", got, r.header.Get("Writ-Decision-Id"))
	}
}

// TestRefusals: writ's own answers through ext_proc have the sidecar's bodies
// and content types, and a refusal is never a 200 (a JSON-RPC error the
// sidecar sends on 200 gets its fault's REST status).
func TestRefusals(t *testing.T) {
	type call struct {
		name                string
		method, path, token string
		body                string
		want                int // through ext_proc
	}
	send := `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"x"}]}}}`
	calls := func(w *world) []call {
		inv := w.token(investigator)
		return []call{
			{"denied", "POST", "/kyc/", inv, send, 403},
			{"anonymous", "POST", "/", "", send, 401},
			{"invalid params", "POST", "/", inv, `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{}}`, 400},
			{"unknown method", "POST", "/", inv, `{"jsonrpc":"2.0","id":7,"method":"tasks/nope","params":{}}`, 404},
			{"malformed", "POST", "/", inv, `{"jsonrpc":`, 400},
			{"unknown task", "POST", "/", inv, `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"t-none"}}`, 404},
			{"card", "GET", "/.well-known/agent-card.json", inv, "", 200},
			{"hidden card", "GET", "/kyc/.well-known/agent-card.json", inv, "", 404},
			{"directory", "GET", "/.well-known/writ/directory", inv, "", 200},
		}
	}
	run := func(w *world) *transcript {
		tr := &transcript{}
		for _, c := range calls(w) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			tr.add(c.name, w.do(c.method, c.path, c.token, body, nil))
		}
		return tr
	}
	ref := newWorld(t, sidecarDoor, nil)
	refSteps, _ := ref.normalized(run(ref))
	w := newWorld(t, deployment(), nil)
	tr := run(w)
	steps, _ := w.normalized(tr)
	sameForCaller(t, refSteps, steps)
	for i, c := range calls(w) {
		if tr.steps[i].status != c.want {
			t.Errorf("%s: %d through ext_proc, want %d: %s", c.name, tr.steps[i].status, c.want, tr.steps[i].body)
		}
	}
	for _, o := range w.agents["kyc"].Requests() {
		if o.Method == "message/send" {
			t.Error("a denied send reached the agent")
		}
	}
	// The events report each request once, with the status the caller got.
	var got []int
	for _, e := range w.served.wait(t, len(calls(w))) {
		if e.Mode != events.ModeExtProc {
			t.Errorf("event mode %q", e.Mode)
		}
		got = append(got, e.Status)
	}
	var want []int
	for _, c := range calls(w) {
		want = append(want, c.want)
	}
	if !slices.Equal(got, want) {
		t.Errorf("served events %v, want %v", got, want)
	}
}

// TestFailClosed: when Envoy's configuration keeps a request's body or its
// phase from writ, the request does not reach the agent; when it keeps an
// answer writ must rewrite (a listing), the listing is refused or withheld.
func TestFailClosed(t *testing.T) {
	sendBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"x"}]}}}`)
	sends := func(w *world) int {
		n := 0
		for _, o := range w.agents["sanctions"].Requests() {
			if o.Method == "message/send" {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name   string
		mode   func(*extproctest.Envoy)
		status int
	}{
		{"request body NONE", func(e *extproctest.Envoy) {
			e.SetModes, e.RequestBodyMode, e.ResponseBodyMode = true, modev3.ProcessingMode_NONE, modev3.ProcessingMode_STREAMED
		}, 400},
		{"request body STREAMED", func(e *extproctest.Envoy) {
			e.SetModes, e.RequestBodyMode, e.ResponseBodyMode = true, modev3.ProcessingMode_STREAMED, modev3.ProcessingMode_STREAMED
		}, 400},
		{"no protocol_config", func(e *extproctest.Envoy) { e.NoProtocolConfig = true }, 400},
		{"request headers skipped", func(e *extproctest.Envoy) { e.SkipRequestHeaders = true }, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, extprocDoor(c.name, c.mode), nil)
			r := w.do("POST", "/", w.token(investigator), sendBody, nil)
			if r.status != c.status || sends(w) != 0 {
				t.Errorf("%d %s; the agent saw %d sends", r.status, r.body, sends(w))
			}
			if c.status == 400 && !strings.Contains(string(r.body), "request_body_mode must be BUFFERED") {
				t.Errorf("refusal %s", r.body)
			}
			if c.name != "request headers skipped" {
				// A request without a body is decided on its headers.
				if r := w.do("GET", "/.well-known/agent-card.json", w.token(investigator), nil, nil); r.status != 200 {
					t.Errorf("card: %d %s", r.status, r.body)
				}
			}
		})
	}
	t.Run("response body NONE", func(t *testing.T) {
		w := newWorld(t, extprocDoor("none", func(e *extproctest.Envoy) {
			e.SetModes, e.RequestBodyMode, e.ResponseBodyMode = true, modev3.ProcessingMode_BUFFERED, modev3.ProcessingMode_NONE
			e.IgnoreModeOverride = true
		}), nil)
		inv := w.token(investigator)
		r := w.rpc("/lister/", inv, "1.0", "ListTasks", map[string]any{})
		if r.status != http.StatusServiceUnavailable || strings.Contains(string(r.body), "t-retail") {
			t.Errorf("list: %d %s", r.status, r.body)
		}
		for _, b := range w.lister.seen() {
			if strings.Contains(b, "ListTasks") {
				t.Error("the list reached the agent")
			}
		}
		// A send goes on; its answer passes unread (nothing recorded).
		if r := w.rpc("/lister/", inv, "1.0", "SendMessage", sendParams10); r.status != 200 || !strings.Contains(string(r.body), "t-inv") {
			t.Errorf("send: %d %s", r.status, r.body)
		}
		if _, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "sanctions-lister", ID: "t-inv"}); ok {
			t.Error("an answer Envoy did not show writ was recorded")
		}
	})
	t.Run("response headers skipped", func(t *testing.T) {
		w := newWorld(t, extprocDoor("blind", func(e *extproctest.Envoy) { e.SkipResponseHeaders = true }), nil)
		r := w.rpc("/lister/", w.token(investigator), "1.0", "ListTasks", map[string]any{})
		if strings.Contains(string(r.body), "t-retail") || !strings.Contains(string(r.body), `"error"`) {
			t.Errorf("list: %d %s", r.status, r.body)
		}
	})
}

// TestObservabilityMode: Envoy ignores every answer in observability mode, so
// writ refuses the stream rather than pretend to enforce.
func TestObservabilityMode(t *testing.T) {
	w := newWorld(t, deployment(), nil)
	conn, err := grpc.NewClient("passthrough:///"+w.ext.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := extprocv3.NewExternalProcessorClient(conn).Process(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.Send(&extprocv3.ProcessingRequest{ObservabilityMode: true, Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{EndOfStream: true}}})
	if _, err := stream.Recv(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("observability mode: %v", err)
	}
}

// TestAnswerTooLarge: an answer over envoy.max_response_bytes is refused as
// the sidecar refuses one over its bound (the agent's fault, 502) — with its
// status while Envoy holds the answer (BUFFERED); in STREAMED mode the
// status is gone downstream and only the body is replaced.
func TestAnswerTooLarge(t *testing.T) {
	small := func(c *config.Config) { c.Envoy.MaxResponseBytes = 200 }
	for _, d := range []door{deployment(), extprocDoor("streamed", func(e *extproctest.Envoy) {
		e.IgnoreModeOverride, e.Chunking = true, extproctest.Chunkings[2]
	})} {
		t.Run(d.name, func(t *testing.T) {
			w := newWorld(t, d, small)
			r := w.rpc("/", w.token(investigator), "", "message/send", map[string]any{"message": msg03("Screen", nil)})
			a := r.rpc(t)
			if a.Error == nil || !strings.Contains(a.Error.Message, "exceeds 200 bytes") {
				t.Fatalf("%d %s", r.status, r.body)
			}
			want := http.StatusBadGateway
			if d.name == "streamed" {
				want = http.StatusOK
			}
			if r.status != want {
				t.Errorf("status %d, want %d", r.status, want)
			}
			if ev := w.served.wait(t, 1); len(ev) != 1 || ev[0].InvalidAnswers != 1 || ev[0].UpstreamFailure != events.UpstreamBroken ||
				ev[0].Status != http.StatusBadGateway {
				t.Errorf("events %+v", ev)
			}
		})
	}
}

// TestStreamAbandoned: a caller that goes away mid-stream ends the ext_proc
// stream and the relay behind it; nothing outlives the request.
func TestStreamAbandoned(t *testing.T) {
	release := make(chan struct{})
	up := newFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t-s","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	w := newWorld(t, deployment(), func(c *config.Config) {
		a := c.Agents[0]
		a.Name, a.Route, a.Upstream = "streamer", "/streamer", up.srv.URL
		c.Agents = append(c.Agents, a)
	})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", w.url+"/streamer/", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"x"}]}}}`))
	req.Header.Set("Authorization", "Bearer "+w.token(investigator))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, "t-s") {
		t.Fatalf("first event %q %v", line, err)
	}
	if rec, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "streamer", ID: "t-s"}); !ok || rec.Task.State != task.Running {
		t.Errorf("the first event was not recorded before it was passed on: %+v", rec)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for w.ext.StreamsInFlight() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := w.ext.StreamsInFlight(); n != 0 {
		t.Errorf("%d streams outlived their request", n)
	}
}

// TestTrailersCutUnfinishedEvent: when trailers end a stream, an event the
// agent left unfinished (no blank line after it) cannot be passed on — a
// trailers message carries no body — but it is observed: the store records
// what the agent said. Every finished event reaches the caller.
func TestTrailersCutUnfinishedEvent(t *testing.T) {
	w := newWorld(t, extprocDoor("trailers", func(e *extproctest.Envoy) { e.ResponseTrailers = true }), nil)
	r := w.rpc("/odd/", w.token(investigator), "1.0", "SendStreamingMessage", sendParams10)
	if !strings.Contains(string(r.body), "artifactUpdate") || strings.Contains(string(r.body), "statusUpdate") {
		t.Errorf("stream: %s", r.body)
	}
	if rec, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "sanctions-odd", ID: "t-odd"}); !ok || rec.Task.State != task.Succeeded {
		t.Errorf("record %+v %v", rec, ok)
	}
}
