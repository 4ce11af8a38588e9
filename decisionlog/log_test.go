package decisionlog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))

const t0JSON = `"2026-03-04T04:06:07.123456789Z"`

func fixedNow() time.Time { return t0 }

// blockingWriter blocks every Write until release is closed, telling entered
// about the first.
type blockingWriter struct {
	syncbuf.Buffer
	entered chan struct{}
	once    sync.Once
	release chan struct{}
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return w.Buffer.Write(p)
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func mustWriter(t testing.TB, w io.Writer, cfg config.DecisionLog, o options) *Log {
	t.Helper()
	l, err := newWriter(w, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sealRE matches a line's place in the digest chain, as the encoders write it.
var sealRE = regexp.MustCompile(`,?"seq":[0-9]+,"prev":"[0-9a-f]{64}"`)

var custodyRE = regexp.MustCompile(`^\{"time":"[^"]*","type":"(log_started|log_continued|checkpoint|lines_lost)"`)

// eventLines are a log's event lines, without the custody lines and each
// without its seq and prev: what the events alone make of the log.
func eventLines(s string) []string {
	var out []string
	for _, l := range lines(s) {
		if l == "" || custodyRE.MatchString(l) {
			continue
		}
		out = append(out, sealRE.ReplaceAllString(l, ""))
	}
	return out
}

// kycCaller is an authenticated agent acting for a user. Claims, scopes and
// credentials never reach the log: events.Caller has no field for them.
func kycCaller() events.Caller {
	return events.Caller{
		Authenticated: true,
		Method:        "jwt",
		Issuer:        "https://idp.bank.example",
		AgentID:       "kyc-orchestrator",
		UserID:        "analyst-7",
		Tenant:        "retail",
		Chain:         []string{"case-intake", "kyc-orchestrator"},
	}
}

var a2aJSONRPC = task.Protocol{Name: "a2a", Version: "1.0", Binding: task.BindingJSONRPC, Method: "SendMessage"}

func allowEvent() events.Decision {
	return events.Decision{Time: t0, ID: "dec-1", Mode: events.ModeSidecar, Route: "sanctions-screener",
		Operation: task.OpSend, Protocol: a2aJSONRPC, Caller: kycCaller(), TaskID: "task-1", ContextID: "ctx-1",
		Allow: true, Revision: "rev-42", CacheHit: true, Eval: 1500 * time.Microsecond, Latency: 2250 * time.Microsecond}
}

func denyEvent() events.Decision {
	return events.Decision{Time: t0, ID: "dec-2", Mode: events.ModeExtAuthz, Route: "payments",
		Operation: task.OpCancel, Protocol: task.Protocol{Name: "acp", Version: "0.2", Binding: task.BindingREST},
		Caller: events.Caller{Method: "anonymous"}, TaskID: "task-9", DryRun: true,
		Denials:  []task.Denial{{Code: "unauthenticated", Reason: "no credentials"}, {Code: "not_owner", Reason: "task \"task-9\" belongs to another caller\n"}},
		Revision: "rev-42", Eval: 250 * time.Microsecond, Latency: time.Millisecond, Error: "policy: undefined decision"}
}

func pushNotification() push.Notification {
	return push.Notification{TaskID: "task-1", ContextID: "ctx-1",
		URL:    "https://hook-user:hook-pass@hooks.bank.example:8443/cb/path-s3cr3t?token=query-s3cr3t",
		Header: http.Header{"X-A2A-Notification-Token": {"token-s3cr3t"}, "Authorization": {"Bearer cred-s3cr3t"}},
		Body:   []byte(`{"statusUpdate":{"message":"body-s3cr3t"}}`), Seq: 3}
}

var goldens = []struct {
	name string
	log  func(*Log)
	want string
}{
	{"decision allow", func(l *Log) { l.Decided(allowEvent()) },
		`{"time":` + t0JSON + `,"type":"decision","decision_id":"dec-1","mode":"sidecar","route":"sanctions-screener","operation":"send","protocol":"a2a/1.0/jsonrpc",` +
			`"caller":{"authenticated":true,"method":"jwt","issuer":"https://idp.bank.example","agent_id":"kyc-orchestrator","user_id":"analyst-7","tenant":"retail","chain":["case-intake","kyc-orchestrator"]},` +
			`"task_id":"task-1","context_id":"ctx-1","allow":true,"policy_revision":"rev-42","cache_hit":true,"latency_ms":2.25,"eval_ms":1.5}`},
	{"decision deny", func(l *Log) { l.Decided(denyEvent()) },
		`{"time":` + t0JSON + `,"type":"decision","decision_id":"dec-2","mode":"ext_authz","route":"payments","operation":"cancel","protocol":"acp/0.2/rest",` +
			`"caller":{"authenticated":false,"method":"anonymous"},"task_id":"task-9","allow":false,"dry_run":true,` +
			`"denials":[{"code":"unauthenticated","reason":"no credentials"},{"code":"not_owner","reason":"task \"task-9\" belongs to another caller\n"}],` +
			`"policy_revision":"rev-42","latency_ms":1,"eval_ms":0.25,"error":"policy: undefined decision"}`},
	{"decision discover, zero time", func(l *Log) {
		l.Decided(events.Decision{ID: "dec-3", Mode: events.ModeSidecar, Route: "payments", Operation: task.OpDiscover,
			Protocol: task.Protocol{Name: "writ", Method: "GET /agents"}, Caller: events.Caller{}, Allow: false})
	}, `{"time":` + t0JSON + `,"type":"decision","decision_id":"dec-3","mode":"sidecar","route":"payments","operation":"discover","protocol":"writ","caller":{"authenticated":false},"allow":false}`},
	{"task created", func(l *Log) {
		l.TaskChanged(events.Task{Time: t0, Kind: events.TaskCreated, Route: "sanctions-screener", TaskID: "task-1", ContextID: "ctx-1", To: task.Queued})
	}, `{"time":` + t0JSON + `,"type":"task_created","route":"sanctions-screener","task_id":"task-1","context_id":"ctx-1","to":"queued"}`},
	{"task state changed", func(l *Log) {
		l.TaskChanged(events.Task{Time: t0, Kind: events.TaskStateChanged, Route: "sanctions-screener", TaskID: "task-1", ContextID: "ctx-1", From: task.Running, To: task.Succeeded})
	}, `{"time":` + t0JSON + `,"type":"task_state_changed","route":"sanctions-screener","task_id":"task-1","context_id":"ctx-1","from":"running","to":"succeeded"}`},
	{"task artifact", func(l *Log) {
		l.TaskChanged(events.Task{Time: t0, Kind: events.TaskArtifact, Route: "sanctions-screener", TaskID: "task-1", ContextID: "ctx-1", Artifact: "sanctions screening report"})
	}, `{"time":` + t0JSON + `,"type":"task_artifact","route":"sanctions-screener","task_id":"task-1","context_id":"ctx-1","artifact":"sanctions screening report"}`},
	{"task protocol violation", func(l *Log) {
		l.TaskChanged(events.Task{Time: t0, Kind: events.TaskViolation, Route: "sanctions-screener", TaskID: "task-1", ContextID: "ctx-1", From: task.Succeeded, To: task.Running})
	}, `{"time":` + t0JSON + `,"type":"task_protocol_violation","route":"sanctions-screener","task_id":"task-1","context_id":"ctx-1","from":"succeeded","to":"running"}`},
	{"push attempt failed", func(l *Log) {
		l.Pushed(push.Event(push.Result{N: pushNotification(), Attempts: 1, Status: 503, Err: &push.StatusError{Code: 503}}, false))
	}, `{"time":` + t0JSON + `,"type":"push_attempt","task_id":"task-1","context_id":"ctx-1","push":{"host":"hooks.bank.example:8443","attempt":1,"status":503,"delivered":false,"reason":"status_503"}}`},
	{"push attempt delivered", func(l *Log) {
		l.Pushed(push.Event(push.Result{N: pushNotification(), Attempts: 2, Status: 204, Delivered: true}, false))
	}, `{"time":` + t0JSON + `,"type":"push_attempt","task_id":"task-1","context_id":"ctx-1","push":{"host":"hooks.bank.example:8443","attempt":2,"status":204,"delivered":true}}`},
	{"push delivered", func(l *Log) {
		l.Pushed(push.Event(push.Result{N: pushNotification(), Attempts: 2, Status: 200, Delivered: true, Latency: time.Second}, true))
	}, `{"time":` + t0JSON + `,"type":"push_delivered","task_id":"task-1","context_id":"ctx-1","push":{"host":"hooks.bank.example:8443","attempt":2,"status":200,"delivered":true}}`},
	{"push failed, refused", func(l *Log) {
		l.Pushed(push.Event(push.Result{N: pushNotification(), Attempts: 1, Err: &push.RefusedError{Host: "hooks.bank.example:8443", Reason: push.ReasonPrivate}}, true))
	}, `{"time":` + t0JSON + `,"type":"push_failed","task_id":"task-1","context_id":"ctx-1","push":{"host":"hooks.bank.example:8443","attempt":1,"delivered":false,"reason":"refused:private"}}`},
	{"push failed, timeout", func(l *Log) {
		n := pushNotification()
		l.Pushed(push.Event(push.Result{N: n, Attempts: 5, Err: &url.Error{Op: "Post", URL: n.URL, Err: context.DeadlineExceeded}}, true))
	}, `{"time":` + t0JSON + `,"type":"push_failed","task_id":"task-1","context_id":"ctx-1","push":{"host":"hooks.bank.example:8443","attempt":5,"delivered":false,"reason":"timeout"}}`},
	{"push failed, closed", func(l *Log) {
		l.Pushed(push.Event(push.Result{N: pushNotification(), Err: push.ErrClosed}, true))
	}, `{"time":` + t0JSON + `,"type":"push_failed","task_id":"task-1","context_id":"ctx-1","push":{"host":"hooks.bank.example:8443","delivered":false,"reason":"closed"}}`},
}

func TestGoldenLines(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			var buf syncbuf.Buffer
			l := mustWriter(t, &buf, config.DecisionLog{}, options{now: fixedNow})
			g.log(l)
			closeLog(t, l)
			if got := eventLines(buf.String()); len(got) != 1 || got[0] != g.want {
				t.Fatalf("line:\n got %s\nwant %s", got, g.want)
			}
			// Every line is valid JSON and fits Line exactly: no key outside the schema.
			dec := json.NewDecoder(strings.NewReader(g.want))
			dec.DisallowUnknownFields()
			var ln Line
			if err := dec.Decode(&ln); err != nil {
				t.Fatalf("decode into Line: %v", err)
			}
			if !ln.Time.Equal(t0) {
				t.Errorf("time %v, want %v", ln.Time, t0)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(g.want), &m); err != nil {
				t.Fatal(err)
			}
			if m["type"] == TypeDecision {
				if _, ok := m["allow"].(bool); !ok {
					t.Error("decision line without allow")
				}
				if _, ok := m["caller"].(map[string]any)["authenticated"].(bool); !ok {
					t.Error("decision line without caller.authenticated")
				}
			}
			if l.Stats() != (Stats{Written: 1}) {
				t.Errorf("stats %+v", l.Stats())
			}
		})
	}
}

func TestOPAFormat(t *testing.T) {
	var buf syncbuf.Buffer
	l := mustWriter(t, &buf, config.DecisionLog{Format: "opa"}, options{now: fixedNow})
	l.Decided(allowEvent())
	l.Decided(denyEvent())
	l.TaskChanged(events.Task{Time: t0, Kind: events.TaskCreated, Route: "sanctions-screener", TaskID: "task-1", ContextID: "ctx-1", To: task.Queued})
	l.Pushed(push.Event(push.Result{N: pushNotification(), Attempts: 2, Status: 200, Delivered: true}, true))
	closeLog(t, l)

	callerJSON := `"caller":{"authenticated":true,"method":"jwt","issuer":"https://idp.bank.example","agent_id":"kyc-orchestrator","user_id":"analyst-7","tenant":"retail","chain":["case-intake","kyc-orchestrator"]}`
	want := []string{
		`{"decision_id":"dec-1","timestamp":` + t0JSON + `,"path":"writ/authz/decision",` +
			`"input":{"mode":"sidecar","route":"sanctions-screener","operation":"send","protocol":"a2a/1.0/jsonrpc",` + callerJSON + `,"task_id":"task-1","context_id":"ctx-1"},` +
			`"result":{"allow":true},"labels":{"app":"writ"},"metrics":{"timer_rego_query_eval_ns":1500000,"timer_server_handler_ns":2250000},` +
			`"revision":"rev-42","bundles":{"writ":{"revision":"rev-42"}},"custom":{"cache_hit":true}}`,
		`{"decision_id":"dec-2","timestamp":` + t0JSON + `,"path":"writ/authz/decision",` +
			`"input":{"mode":"ext_authz","route":"payments","operation":"cancel","protocol":"acp/0.2/rest","caller":{"authenticated":false,"method":"anonymous"},"task_id":"task-9"},` +
			`"result":{"allow":false,"denials":[{"code":"unauthenticated","reason":"no credentials"},{"code":"not_owner","reason":"task \"task-9\" belongs to another caller\n"}]},` +
			`"labels":{"app":"writ"},"metrics":{"timer_rego_query_eval_ns":250000,"timer_server_handler_ns":1000000},` +
			`"revision":"rev-42","bundles":{"writ":{"revision":"rev-42"}},"error":{"code":"internal_error","message":"policy: undefined decision"},"custom":{"dry_run":true}}`,
		// Lifecycle and push lines are the writ format's.
		goldenOf(t, "task created"),
		goldenOf(t, "push delivered"),
	}
	got := eventLines(buf.String())
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	// Both decisions decode strictly into OPA's event type: the field names are
	// OPA's.
	for _, line := range got[1:2] {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var ev opaEventV1
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("decode into OPA's EventV1: %v", err)
		}
	}
	dec := json.NewDecoder(strings.NewReader(got[0]))
	dec.DisallowUnknownFields()
	var ev opaEventV1
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("decode into OPA's EventV1: %v", err)
	}
	if ev.DecisionID != "dec-1" || ev.Path != OPAPath || !ev.Timestamp.Equal(t0) || ev.Labels["app"] != "writ" ||
		ev.Bundles["writ"].Revision != "rev-42" || ev.Metrics["timer_rego_query_eval_ns"] != float64(1500000) {
		t.Errorf("OPA event %+v", ev)
	}
	if res, ok := (*ev.Result).(map[string]any); !ok || res["allow"] != true {
		t.Errorf("result %v", *ev.Result)
	}
}

// opaEventV1 is OPA's decision-log event, plugins/logs.EventV1 of OPA v1.22.3
// (every field, with its JSON name; Error is OPA's {"code","message"} form).
// Importing OPA's package here would pull modules writ does not require.
type opaEventV1 struct {
	Labels          map[string]string `json:"labels"`
	DecisionID      string            `json:"decision_id"`
	BatchDecisionID string            `json:"batch_decision_id,omitempty"`
	TraceID         string            `json:"trace_id,omitempty"`
	SpanID          string            `json:"span_id,omitempty"`
	Revision        string            `json:"revision,omitempty"`
	Bundles         map[string]struct {
		Revision string `json:"revision,omitempty"`
	} `json:"bundles,omitempty"`
	Path                string         `json:"path,omitempty"`
	Query               string         `json:"query,omitempty"`
	Input               *any           `json:"input,omitempty"`
	Result              *any           `json:"result,omitempty"`
	IntermediateResults map[string]any `json:"intermediate_results,omitempty"`
	MappedResult        *any           `json:"mapped_result,omitempty"`
	NDBuiltinCache      *any           `json:"nd_builtin_cache,omitempty"`
	Erased              []string       `json:"erased,omitempty"`
	Masked              []string       `json:"masked,omitempty"`
	Error               *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
	RequestedBy    string           `json:"requested_by,omitempty"`
	Timestamp      time.Time        `json:"timestamp"`
	Metrics        map[string]any   `json:"metrics,omitempty"`
	RequestID      uint64           `json:"req_id,omitempty"`
	RuleLabels     []map[string]any `json:"rule_labels,omitempty"`
	RequestContext *any             `json:"request_context,omitempty"`
	Custom         map[string]any   `json:"custom,omitempty"`
}

func goldenOf(t *testing.T, name string) string {
	for _, g := range goldens {
		if g.name == name {
			return g.want
		}
	}
	t.Fatalf("no golden %q", name)
	return ""
}

// TestContextStory: one context_id tells the story of an investigation, in
// order, whatever else the log holds.
func TestContextStory(t *testing.T) {
	var buf syncbuf.Buffer
	l := mustWriter(t, &buf, config.DecisionLog{}, options{})
	other := func(i int) {
		l.Decided(events.Decision{ID: fmt.Sprint("other-", i), Route: "payments", Operation: task.OpGet, ContextID: "ctx-other", Allow: true})
		l.TaskChanged(events.Task{Kind: events.TaskStateChanged, Route: "payments", TaskID: "task-other", ContextID: "ctx-other", From: task.Queued, To: task.Running})
	}
	const id = "ctx-investigation-17"
	other(0)
	l.Decided(events.Decision{ID: "dec-a", Mode: events.ModeSidecar, Route: "sanctions-screener", Operation: task.OpSend,
		Protocol: a2aJSONRPC, Caller: kycCaller(), ContextID: id, Allow: true})
	l.Served(events.Request{Mode: events.ModeSidecar, Route: "sanctions-screener", Operation: task.OpSend, Status: 200})
	other(1)
	l.TaskChanged(events.Task{Kind: events.TaskCreated, Route: "sanctions-screener", TaskID: "task-s", ContextID: id, To: task.Running})
	l.TaskChanged(events.Task{Kind: events.TaskArtifact, Route: "sanctions-screener", TaskID: "task-s", ContextID: id, Artifact: "screening-report"})
	other(2)
	l.TaskChanged(events.Task{Kind: events.TaskStateChanged, Route: "sanctions-screener", TaskID: "task-s", ContextID: id, From: task.Running, To: task.Succeeded})
	l.Pushed(push.Event(push.Result{N: push.Notification{TaskID: "task-s", ContextID: id, URL: "https://hooks.bank.example/cb"}, Attempts: 1, Status: 200, Delivered: true}, true))
	other(3)
	closeLog(t, l)

	var story []string
	var prev time.Time
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	n := 0
	for sc.Scan() {
		n++
		var ln Line
		if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
			t.Fatal(err)
		}
		if custodyRE.Match(sc.Bytes()) {
			n--
			continue
		}
		if ln.ContextID != id {
			continue
		}
		if ln.Time.Before(prev) {
			t.Errorf("time goes back at %s", sc.Text())
		}
		prev = ln.Time
		story = append(story, ln.Type)
		if ln.Type != TypeDecision && ln.TaskID != "task-s" {
			t.Errorf("lifecycle line without its task: %s", sc.Text())
		}
	}
	want := []string{TypeDecision, TypeTaskCreated, TypeTaskArtifact, TypeTaskStateChanged, TypePushDelivered}
	if fmt.Sprint(story) != fmt.Sprint(want) {
		t.Errorf("story %v, want %v", story, want)
	}
	if n != 5+8 {
		t.Errorf("%d lines, want 13 (Served writes none)", n)
	}
}

// TestNoSecrets: claims, tokens, credentials, callback paths and queries, and
// message bodies never reach the log, in either format.
func TestNoSecrets(t *testing.T) {
	secrets := []string{"claim-s3cr3t-value", "analyst7@bank.example", "session_secret", "claims", "a2a:send", "confidential",
		"token-s3cr3t", "cred-s3cr3t", "hook-user", "hook-pass", "path-s3cr3t", "query-s3cr3t", "body-s3cr3t", "/cb", "SendMessage"}
	for _, format := range []string{"writ", "opa"} {
		t.Run(format, func(t *testing.T) {
			var buf syncbuf.Buffer
			l := mustWriter(t, &buf, config.DecisionLog{Format: format}, options{})
			l.Decided(allowEvent())
			ev := allowEvent()
			ev.Allow, ev.Denials = false, []task.Denial{{Code: "chain_too_long", Reason: "delegation chain exceeds 2 hops"}}
			l.Decided(ev)
			n := pushNotification()
			l.Pushed(push.Event(push.Result{N: n, Attempts: 1, Err: &url.Error{Op: "Post", URL: n.URL, Err: errors.New("connection refused")}}, false))
			l.Pushed(push.Event(push.Result{N: n, Attempts: 1, Err: &url.Error{Op: "Post", URL: n.URL, Err: errors.New("connection refused")}}, true))
			l.Pushed(push.Event(push.Result{N: n, Attempts: 2, Status: 200, Delivered: true}, true))
			closeLog(t, l)
			out := buf.String()
			if len(eventLines(out)) != 5 {
				t.Fatalf("want 5 lines:\n%s", out)
			}
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("log holds %q:\n%s", s, out)
				}
			}
			if !strings.Contains(out, `"reason":"connection"`) || !strings.Contains(out, `"host":"hooks.bank.example:8443"`) {
				t.Errorf("push lines lack host or reason:\n%s", out)
			}
		})
	}
}

func TestBufferOverflowDropsWithoutBlocking(t *testing.T) {
	w := newBlockingWriter()
	var logBuf syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	l := mustWriter(t, w, config.DecisionLog{Buffer: 4}, options{logger: logger})

	l.Decided(allowEvent()) // taken by the writer, which blocks in Write
	select {
	case <-w.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("writer never wrote")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 4 + 10 { // 4 fill the buffer, 10 overflow
			l.Decided(allowEvent())
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("logging blocked on a full buffer")
	}
	if s := l.Stats(); s.Dropped != 10 || s.Written != 0 {
		t.Errorf("stats %+v, want 10 dropped, none written yet", s)
	}
	// The 1st, 2nd, 4th and 8th drops are logged.
	if n := strings.Count(logBuf.String(), "buffer full"); n != 4 {
		t.Errorf("%d drop records, want 4:\n%s", n, logBuf.String())
	}
	close(w.release)
	closeLog(t, l)
	if s := l.Stats(); s != (Stats{Written: 5, Dropped: 10}) {
		t.Errorf("stats %+v, want 5 written, 10 dropped", s)
	}
	if n := len(eventLines(w.String())); n != 5 {
		t.Errorf("%d lines written, want 5", n)
	}
}

func TestCloseFlushes(t *testing.T) {
	var buf syncbuf.Buffer
	l := mustWriter(t, &buf, config.DecisionLog{Buffer: 5000}, options{})
	const n = 3000
	for i := range n {
		l.TaskChanged(events.Task{Kind: events.TaskStateChanged, TaskID: fmt.Sprint("task-", i), ContextID: "ctx", From: task.Queued, To: task.Running})
	}
	closeLog(t, l)
	got := eventLines(buf.String())
	if len(got) != n || l.Stats() != (Stats{Written: n}) {
		t.Fatalf("%d lines, stats %+v; want %d written", len(got), l.Stats(), n)
	}
	for i, s := range got {
		if !strings.Contains(s, fmt.Sprintf(`"task_id":"task-%d"`, i)) {
			t.Fatalf("line %d out of order: %s", i, s)
		}
	}
	// Lines after Close are dropped, never written, never a panic.
	l.Decided(allowEvent())
	if s := l.Stats(); s.Dropped != 1 || s.Written != n {
		t.Errorf("after Close: %+v", s)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseDeadline(t *testing.T) {
	w := newBlockingWriter()
	l := mustWriter(t, w, config.DecisionLog{}, options{logger: slog.New(slog.DiscardHandler)})
	l.Decided(allowEvent())
	<-w.entered
	for range 5 {
		l.Decided(allowEvent())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := l.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v past its deadline", d)
	}
	close(w.release)
	<-l.done
	if s := l.Stats(); s != (Stats{Written: 1, Dropped: 5}) {
		t.Errorf("stats %+v, want the blocked line written and 5 dropped", s)
	}
}

func TestWriteErrorsCounted(t *testing.T) {
	var logBuf syncbuf.Buffer
	l := mustWriter(t, failingWriter{}, config.DecisionLog{}, options{logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	l.Decided(allowEvent())
	closeLog(t, l)
	if s := l.Stats(); s != (Stats{Errors: 1}) {
		t.Errorf("stats %+v", s)
	}
	if !strings.Contains(logBuf.String(), "write failed") {
		t.Errorf("no record of the failure: %s", logBuf.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestOffWritesNothing(t *testing.T) {
	var buf syncbuf.Buffer
	l := mustWriter(t, &buf, config.DecisionLog{Output: "off"}, options{})
	t.Chdir(t.TempDir())
	l2, err := New(config.DecisionLog{Output: "off"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Log{l, l2} {
		l.Decided(allowEvent())
		l.TaskChanged(events.Task{Kind: events.TaskCreated, TaskID: "t"})
		l.Pushed(push.Event(push.Result{N: pushNotification()}, false))
		l.Pushed(push.Event(push.Result{N: pushNotification()}, true))
		closeLog(t, l)
		if l.Stats() != (Stats{}) {
			t.Errorf("stats %+v", l.Stats())
		}
	}
	if buf.String() != "" {
		t.Errorf("off wrote %q", buf.String())
	}
	if ents, _ := os.ReadDir("."); len(ents) != 0 {
		t.Errorf("off created %v", ents)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(config.DecisionLog{Output: "off", Format: "json"}); err == nil {
		t.Error("unknown format accepted")
	}
	if _, err := New(config.DecisionLog{Output: filepath.Join(t.TempDir(), "missing", "decisions.log")}); err == nil {
		t.Error("unopenable path accepted")
	}
}

// TestConcurrent logs from many goroutines while closing: every line is
// accounted for, and -race finds nothing.
func TestConcurrent(t *testing.T) {
	l := mustWriter(t, io.Discard, config.DecisionLog{Buffer: 64}, options{logger: slog.New(slog.DiscardHandler)})
	var wg sync.WaitGroup
	const workers, each = 8, 500
	for range workers {
		wg.Go(func() {
			for range each {
				l.Decided(allowEvent())
				l.Pushed(push.Event(push.Result{N: pushNotification(), Delivered: true}, true))
			}
		})
	}
	time.Sleep(time.Millisecond)
	closeLog(t, l)
	wg.Wait()
	if s := l.Stats(); s.Written+s.Dropped != 2*workers*each || s.Errors != 0 {
		t.Errorf("stats %+v, want %d accounted for", s, 2*workers*each)
	}
}
