package extproc_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	modev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
	"github.com/writ-authz/writ/task"
)

// scenario is one of the sidecar's lifecycle scenarios, written once and run
// through every door. It records what the caller saw; settle waits until
// writ's background work (push deliveries, task following) is done, so that
// the stores compare.
type scenario struct {
	name string
	// streams: the scenario's answers are SSE (run with every chunking).
	streams bool
	// differs names the Envoy modes under which the caller sees a documented
	// difference (tested on its own), with why.
	differs map[string]string
	run     func(t *testing.T, w *world, tr *transcript)
}

var scenarios = []scenario{
	{name: "ownership", run: func(t *testing.T, w *world, tr *transcript) {
		inv, retail := w.token(investigator), w.token(retailBot)
		id, state := tr.add("send", w.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("Screen PMT-771", nil)})).task03(t)
		if state != "completed" {
			t.Fatalf("send: %s", state)
		}
		// Another caller's follow-up is answered as if the task did not exist.
		r := tr.add("foreign get", w.rpc("/", retail, "", "tasks/get", map[string]any{"id": id}))
		if a := r.rpc(t); a.Error == nil || a.Error.Code != -32001 {
			t.Errorf("foreign get: %d %s", r.status, r.body)
		}
		tr.add("foreign send on the task", w.rpc("/", retail, "", "message/send", map[string]any{"message": msg03("x", map[string]any{"taskId": id})}))
		tr.add("own get", w.rpc("/", inv, "", "tasks/get", map[string]any{"id": id}))
		rec, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: id})
		if !ok || rec.Task.Owner.AgentID != "payments-investigator" || rec.Task.State != task.Succeeded {
			t.Errorf("record %+v %v", rec, ok)
		}
		for _, o := range w.agents["sanctions"].Requests() {
			if o.Method == "message/send" && !strings.Contains(o.Caller, `"agent_id":"payments-investigator"`) {
				t.Errorf("the agent saw Writ-Caller %q", o.Caller)
			}
		}
	}},
	{name: "terminal", run: func(t *testing.T, w *world, tr *transcript) {
		inv := w.token(investigator)
		id, _ := tr.add("send", w.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("Screen", nil)})).task03(t)
		r := tr.add("cancel a completed task", w.rpc("/", inv, "", "tasks/cancel", map[string]any{"id": id}))
		if a := r.rpc(t); a.Error == nil || a.Error.Code != -32002 {
			t.Errorf("cancel: %d %s", r.status, r.body)
		}
		tr.add("message to a completed task", w.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("again", map[string]any{"taskId": id})}))
		for _, o := range w.agents["sanctions"].Requests() {
			if o.Method == "tasks/cancel" {
				t.Error("the agent was asked to cancel a finished task")
			}
		}
	}},
	{name: "push", run: func(t *testing.T, w *world, tr *transcript) {
		inv := w.token(investigator)
		cb := w.rcv.srv.URL + "/cb"
		r := tr.add("send with push", w.rpc("/clarifier/", inv, "", "message/send", map[string]any{"message": msg03("Screen this entity", nil),
			"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": cb, "token": "tok-1",
				"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "cred-1"}}}}))
		id, state := r.task03(t)
		if state != "input-required" {
			t.Fatalf("send: %s", r.body)
		}
		tr.add("reply", w.rpc("/clarifier/", inv, "", "message/send", map[string]any{"message": msg03("UAE and UN lists", map[string]any{"taskId": id})}))
		bodies := w.rcv.waitFor(t, `"state":"completed"`)
		for i, b := range bodies {
			tr.note("notification", b)
			if w.rcv.hdr[i].Get("X-A2A-Notification-Token") != "tok-1" || w.rcv.hdr[i].Get("Authorization") != "Bearer cred-1" {
				t.Errorf("notification %d headers %v", i, w.rcv.hdr[i])
			}
		}
		for _, o := range w.agents["clarifier"].Requests() {
			if strings.Contains(o.Body, w.rcv.srv.URL) || strings.Contains(o.Body, "tok-1") {
				t.Fatalf("the agent saw the push config: %s", o.Body)
			}
		}
		tr.add("push list (writ's own)", w.rpc("/clarifier/", inv, "", "tasks/pushNotificationConfig/list", map[string]any{"id": id}))
		tr.add("foreign push list", w.rpc("/clarifier/", w.token(retailBot), "", "tasks/pushNotificationConfig/list", map[string]any{"id": id}))
		tr.add("push set to an outside host", w.rpc("/clarifier/", inv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id,
			"pushNotificationConfig": map[string]any{"id": "second", "url": "https://evil.example/x", "token": "t"}}))
		for _, o := range w.agents["clarifier"].Requests() {
			if strings.Contains(o.Method, "pushNotificationConfig") {
				t.Errorf("the agent saw %s", o.Method)
			}
		}
	}},
	{name: "followed", run: func(t *testing.T, w *world, tr *transcript) {
		// The answer says submitted or working, as the agent's timing has it:
		// only its being accepted is compared.
		r := (&transcript{}).add("non-blocking send with push", w.rpc("/slow/", w.token(investigator), "", "message/send", map[string]any{
			"message":       msg03("Screen slowly", nil),
			"configuration": map[string]any{"blocking": false, "pushNotificationConfig": map[string]any{"url": w.rcv.srv.URL + "/cb", "token": "tok"}}}))
		id, state := r.task03(t)
		if state != "working" && state != "submitted" {
			t.Fatalf("send: %s", r.body)
		}
		tr.note("non-blocking send with push", fmt.Sprintf("%d %s accepted", r.status, r.contentType))
		bodies := w.rcv.waitFor(t, `"state":"completed"`)
		if last := bodies[len(bodies)-1]; !strings.Contains(last, id) {
			t.Errorf("last notification %s", last)
		}
		// Wait until the follower recorded the end (it notifies first).
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if rec, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "sanctions-slow", ID: id}); ok && rec.Task.State.Terminal() {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		tr.note("last notification", bodies[len(bodies)-1])
	}},
	{name: "list filtering", run: func(t *testing.T, w *world, tr *transcript) {
		inv, retail := w.token(investigator), w.token(retailBot)
		tr.add("send (investigator)", w.rpc("/lister/", inv, "1.0", "SendMessage", sendParams10))
		tr.add("send (retail)", w.rpc("/lister/", retail, "1.0", "SendMessage", sendParams10))
		for _, c := range []struct {
			tok, want string
		}{{inv, "t-inv"}, {retail, "t-retail"}} {
			r := tr.add("list", w.rpc("/lister/", c.tok, "1.0", "ListTasks", map[string]any{}))
			var res struct {
				Tasks []struct {
					ID string `json:"id"`
				} `json:"tasks"`
				TotalSize int `json:"totalSize"`
			}
			if err := json.Unmarshal(r.rpc(t).Result, &res); err != nil || len(res.Tasks) != 1 || res.Tasks[0].ID != c.want || res.TotalSize != 1 {
				t.Errorf("list: %d %s", r.status, r.body)
			}
		}
	}},
	{name: "agent down", run: func(t *testing.T, w *world, tr *transcript) {
		inv := w.token(investigator)
		tr.add("send", w.rpc("/", inv, "", "message/send", map[string]any{"message": msg03("Screen", nil)}))
		r := tr.add("send to an agent that is down", w.rpc("/down/", inv, "", "message/send", map[string]any{"message": msg03("Screen", nil)}))
		if a := r.rpc(t); r.status != http.StatusBadGateway || a.Error == nil || !strings.Contains(a.Error.Message, "could not be reached") {
			t.Errorf("%d %s", r.status, r.body)
		}
		evs := w.served.wait(t, 2)
		if len(evs) < 2 || evs[1].UpstreamFailure != events.UpstreamUnavailable {
			t.Errorf("events %+v", evs)
		}
	}},
	{name: "odd stream", streams: true, differs: map[string]string{
		"trailers, BUFFERED": "trailers end the stream and carry no body: the last event, which the agent left unfinished, is observed but cannot be passed on (TestTrailersCutUnfinishedEvent)"},
		run: func(t *testing.T, w *world, tr *transcript) {
			inv := w.token(investigator)
			r := tr.add("stream", w.rpc("/odd/", inv, "1.0", "SendStreamingMessage", sendParams10))
			if !strings.Contains(string(r.body), ": keep-alive") || strings.Contains(string(r.body), "not json") {
				t.Errorf("stream: %s", r.body)
			}
			rec, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "sanctions-odd", ID: "t-odd"})
			if !ok || rec.Task.State != task.Succeeded || len(rec.Task.Artifacts) != 1 {
				t.Errorf("record after the stream: %+v %v", rec, ok)
			}
			tr.add("cancel the finished task", w.rpc("/odd/", inv, "1.0", "CancelTask", map[string]any{"id": "t-odd"}))
		}},
	{name: "stream", streams: true, run: func(t *testing.T, w *world, tr *transcript) {
		inv := w.token(investigator)
		r := tr.add("stream", w.rpc("/", inv, "", "message/stream", map[string]any{"message": msg03("Screen as you go", nil)}))
		if !strings.HasPrefix(r.contentType, "text/event-stream") {
			t.Fatalf("stream: %d %q %s", r.status, r.contentType, r.body)
		}
		var id string
		var states []string
		for _, block := range strings.Split(strings.TrimSpace(string(r.body)), "\n\n") {
			var data string
			for _, line := range strings.Split(block, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					data = d
				}
			}
			var ev struct {
				Result struct {
					Kind   string `json:"kind"`
					ID     string `json:"id"`
					TaskID string `json:"taskId"`
					Status struct {
						State string `json:"state"`
					} `json:"status"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			if id == "" {
				id = ev.Result.ID + ev.Result.TaskID
			}
			if s := ev.Result.Status.State; s != "" {
				states = append(states, s)
			}
		}
		if len(states) == 0 || states[len(states)-1] != "completed" {
			t.Errorf("states in order: %v", states)
		}
		rec, ok, _ := w.store.Get(t.Context(), task.Ref{Agent: "sanctions-screening-agent", ID: id})
		if !ok || rec.Task.State != task.Succeeded {
			t.Errorf("record after the stream: %+v %v", rec, ok)
		}
		tr.add("get after the stream", w.rpc("/", inv, "", "tasks/get", map[string]any{"id": id}))
		tr.add("resubscribe to the finished task", w.rpc("/", inv, "", "tasks/resubscribe", map[string]any{"id": id}))
	}},
}

// modes are the Envoy configurations every scenario runs under, beside
// writ's deployment (STREAMED configured, BUFFERED asked for JSON).
var modes = []struct {
	name string
	set  func(*extproctest.Envoy)
}{
	{"deployment", nil},
	{"override ignored, STREAMED", func(e *extproctest.Envoy) {
		e.IgnoreModeOverride, e.Chunking = true, extproctest.Chunkings[2]
	}},
	{"override ignored, BUFFERED", func(e *extproctest.Envoy) {
		e.IgnoreModeOverride, e.SetModes = true, true
		e.RequestBodyMode, e.ResponseBodyMode = modev3.ProcessingMode_BUFFERED, modev3.ProcessingMode_BUFFERED
	}},
	{"trailers, BUFFERED", func(e *extproctest.Envoy) {
		e.SetModes, e.RequestTrailers, e.ResponseTrailers = true, true, true
		e.RequestBodyMode, e.ResponseBodyMode = modev3.ProcessingMode_BUFFERED, modev3.ProcessingMode_BUFFERED
		e.Chunking = extproctest.Chunkings[2]
	}},
}

// TestLifecycleParity runs every sidecar lifecycle scenario through the
// sidecar and through ext_proc behind a (fake, protocol-faithful) Envoy,
// under each processing mode and, for streams, each chunking: the caller must
// see the same answers and the lifecycle stores must hold the same records.
func TestLifecycleParity(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ref := newWorld(t, sidecarDoor, nil)
			var refTr transcript
			sc.run(t, ref, &refTr)
			refSteps, refStore := ref.normalized(&refTr)
			if !strings.Contains(refStore, "task ") {
				t.Errorf("the scenario recorded no task through the sidecar")
			}
			if t.Failed() {
				t.FailNow()
			}
			type run struct {
				name string
				d    func() *extproctest.Envoy
			}
			var runs []run
			for _, m := range modes {
				runs = append(runs, run{m.name, func() *extproctest.Envoy {
					e := &extproctest.Envoy{}
					if m.set != nil {
						m.set(e)
					}
					return e
				}})
			}
			if sc.streams {
				for _, c := range extproctest.Chunkings {
					runs = append(runs, run{"chunks " + c.Name, func() *extproctest.Envoy { return &extproctest.Envoy{Chunking: c} }})
				}
			}
			for _, r := range runs {
				t.Run(r.name, func(t *testing.T) {
					if why, ok := sc.differs[r.name]; ok {
						t.Skip(why)
					}
					w := newWorld(t, door{name: "ext_proc", envoy: r.d()}, nil)
					var tr transcript
					sc.run(t, w, &tr)
					steps, store := w.normalized(&tr)
					sameForCaller(t, refSteps, steps)
					if store != refStore {
						t.Errorf("store through ext_proc:\n%s\nthrough the sidecar:\n%s", store, refStore)
					}
					if t.Failed() {
						t.Logf("writ's log:\n%s", w.logs.String())
					}
				})
			}
		})
	}
}
