package a2a

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/task"
)

// action is what a request makes an agent do: the operation and the ids (and
// push URL) it acts on. Fields an operation does not use stay empty.
type action struct {
	Op, TaskID, ContextID, PushURL, ConfigID string
}

func (a action) String() string {
	s := a.Op
	for _, f := range []struct{ k, v string }{{"task", a.TaskID}, {"context", a.ContextID}, {"push", a.PushURL}, {"config", a.ConfigID}} {
		if f.v != "" {
			s += " " + f.k + "=" + strconv.Quote(f.v)
		}
	}
	return s
}

// normal keeps the fields the operation uses.
func (a action) normal() action {
	out := action{Op: a.Op}
	switch task.Operation(a.Op) {
	case task.OpSend, task.OpStream:
		out.TaskID, out.ContextID, out.PushURL = a.TaskID, a.ContextID, a.PushURL
	case task.OpGet, task.OpCancel, task.OpSubscribe, task.OpPushList:
		out.TaskID = a.TaskID
	case task.OpList:
		out.ContextID = a.ContextID
	case task.OpPushSet:
		out.TaskID, out.PushURL, out.ConfigID = a.TaskID, a.PushURL, a.ConfigID
	case task.OpPushGet, task.OpPushDelete:
		out.TaskID, out.ConfigID = a.TaskID, a.ConfigID
	}
	return out
}

// decided is what writ decided a request does.
func decided(req task.Request) action {
	a := action{Op: string(req.Operation), TaskID: req.TaskID, ContextID: req.ContextID, ConfigID: req.PushConfigID}
	if req.Push != nil {
		a.PushURL = req.Push.URL
		if req.Operation == task.OpPushSet {
			a.ConfigID = req.Push.ID
		}
	}
	return a.normal()
}

// a2aGoWitness serves a2a-go v0.3.3's own JSON-RPC handler over a request
// handler whose interceptor records each call (method and params, as a2a-go
// decoded them) and refuses it, so nothing runs.
type a2aGoWitness struct {
	a2asrv.PassthroughCallInterceptor
}

type recordKey struct{}

type goRecords struct {
	mu  sync.Mutex
	got []action
}

var errWitness = errors.New("differential witness: nothing is executed")

func (a2aGoWitness) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, error) {
	rec, _ := ctx.Value(recordKey{}).(*goRecords)
	if rec == nil {
		return ctx, errWitness
	}
	var a action
	switch p := req.Payload.(type) {
	case *a2a.TaskQueryParams:
		a = action{Op: string(task.OpGet), TaskID: string(p.ID)}
	case *a2a.TaskIDParams:
		a = action{Op: string(task.OpCancel), TaskID: string(p.ID)}
		if cc.Method() == "OnResubscribeToTask" {
			a.Op = string(task.OpSubscribe)
		}
	case *a2a.MessageSendParams:
		a.Op = string(task.OpSend)
		if cc.Method() == "OnSendMessageStream" {
			a.Op = string(task.OpStream)
		}
		if p.Message != nil {
			a.TaskID, a.ContextID = string(p.Message.TaskID), p.Message.ContextID
		}
		if p.Config != nil && p.Config.PushConfig != nil {
			a.PushURL = p.Config.PushConfig.URL
		}
	case *a2a.TaskPushConfig:
		a = action{Op: string(task.OpPushSet), TaskID: string(p.TaskID), PushURL: p.Config.URL, ConfigID: p.Config.ID}
	case *a2a.GetTaskPushConfigParams:
		a = action{Op: string(task.OpPushGet), TaskID: string(p.TaskID), ConfigID: p.ConfigID}
	case *a2a.ListTaskPushConfigParams:
		a = action{Op: string(task.OpPushList), TaskID: string(p.TaskID)}
	case *a2a.DeleteTaskPushConfigParams:
		a = action{Op: string(task.OpPushDelete), TaskID: string(p.TaskID), ConfigID: p.ConfigID}
	case nil:
		a = action{Op: string(task.OpExtendedCard)}
	default:
		a = action{Op: fmt.Sprintf("unexpected %s %T", cc.Method(), p)}
	}
	rec.mu.Lock()
	rec.got = append(rec.got, a.normal())
	rec.mu.Unlock()
	return ctx, errWitness
}

type noExecutor struct{}

func (noExecutor) Execute(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return errWitness
}
func (noExecutor) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return errWitness
}

// startA2AGo serves a2asrv.NewJSONRPCHandler on 127.0.0.1; each request's
// calls land in the goRecords its context carries (the X-Diff-Case header
// picks the slot).
func startA2AGo(t *testing.T, slots []*goRecords) string {
	h := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(noExecutor{},
		a2asrv.WithCallInterceptor(a2aGoWitness{}),
		a2asrv.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.Header.Get("X-Diff-Case"))
		if err != nil || i < 0 || i >= len(slots) {
			http.Error(w, "no case", http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), recordKey{}, slots[i])))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// send posts one case to a server and drains the answer.
func send(client *http.Client, base string, i int, c dcase) error {
	req, err := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
	if err != nil {
		return err
	}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	req.Header.Set("X-Diff-Case", strconv.Itoa(i))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// witnessed is what one server acted on for one case.
type witnessed struct {
	server string
	acts   []action
}

// differentialCases is the whole differential: every systematic mutation and
// a fixed set of random combinations.
func differentialCases() []dcase {
	cases := systematicCases()
	return append(cases, randomCases(rand.New(rand.NewPCG(11, 2026)), 400)...)
}

// TestEnvelopeDifferential sends every generated request to writ's parser and
// to the real servers behind it — a2a-go v0.3.3's JSON-RPC handler and
// @a2a-js/sdk 1.3.0's JSON-RPC and REST handlers (1.0, and 0.3 through its
// legacyCompat layer) — and checks that what the agent acts on is what writ
// decided: for every case, writ refuses the request, or each server that acts
// on it runs writ's operation on writ's task, context, push URL and config.
//
// Threat: a parser differential: a body writ reads as one request and the
// agent's SDK as another (case and Unicode-fold variants of JSON-RPC
// envelope keys, duplicates, escapes, proto-name aliases). Defence: every
// ambiguous key is refused; proven against the real a2a-go and @a2a-js/sdk
// parsers.
func TestEnvelopeDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the JS SDK server")
	}
	cases := differentialCases()
	slots := make([]*goRecords, len(cases))
	for i := range slots {
		slots[i] = &goRecords{}
	}
	goURL := startA2AGo(t, slots)
	jsURL := peers.StartJSDifferential(t)

	decisions := make([]action, len(cases))
	faults := make([]*task.Fault, len(cases))
	for i, c := range cases {
		req, f := Parse(wire.Inbound{Method: c.method, Path: c.path, Header: c.header.Clone(), Body: c.body}, Options{})
		faults[i] = f
		if f == nil {
			decisions[i] = decided(req)
		}
	}

	// Both servers, four requests in flight at a time.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(client.CloseIdleConnections)
	work := make(chan int)
	errs := make(chan error, len(cases)*2)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				c := cases[i]
				if err := send(client, jsURL, i, c); err != nil {
					errs <- fmt.Errorf("%s: JS server: %w", c, err)
				}
				if c.rpc {
					if err := send(client, goURL, i, c); err != nil {
						errs <- fmt.Errorf("%s: a2a-go server: %w", c, err)
					}
				}
			}
		}()
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	js := peers.JSDifferentialRecords(t, jsURL)

	type stat struct{ cases, refused, acted int }
	stats := map[string]*stat{}
	var failures []string
	fail := func(c dcase, format string, args ...any) {
		failures = append(failures, fmt.Sprintf("%s: %s\n\tbody: %q", c, fmt.Sprintf(format, args...), trim(c.body)))
	}
	for i, c := range cases {
		st := stats[c.family]
		if st == nil {
			st = &stat{}
			stats[c.family] = st
		}
		st.cases++
		jsActs := []action{}
		for _, r := range js[strconv.Itoa(i)] {
			jsActs = append(jsActs, action{Op: r.Op, TaskID: r.TaskID, ContextID: r.ContextID, PushURL: r.PushURL, ConfigID: r.ConfigID}.normal())
		}
		got := []witnessed{{"@a2a-js/sdk", jsActs}}
		if c.rpc {
			got = append(got, witnessed{"a2a-go", slots[i].got})
		}
		// The fuzz target's in-process models must read every request as the
		// real servers did, writ's decision aside (the models know UTF-8 only).
		if c.rpc && c.header.Get("Content-Type") == "application/json" {
			if m, ok := a2aGoModel(c.body); !modelAgrees(m, ok, slots[i].got) {
				fail(c, "the a2a-go model reads %v (acts: %v), the real a2a-go %v", m, ok, slots[i].got)
			}
			if m, ok := jsModel(c.body, c.v10); !modelAgrees(m, ok, jsActs) {
				fail(c, "the JS model reads %v (acts: %v), the real JS SDK %v", m, ok, jsActs)
			}
		}
		if faults[i] != nil {
			st.refused++
			if c.accept {
				fail(c, "writ refused a request it must accept: %s: %s", faults[i].Kind, faults[i].Message)
			}
			continue
		}
		acted := false
		for _, g := range got {
			if len(g.acts) > 1 {
				fail(c, "%s acted %d times: %v", g.server, len(g.acts), g.acts)
				continue
			}
			if len(g.acts) == 0 {
				continue
			}
			acted = true
			if g.acts[0] != decisions[i] {
				fail(c, "writ decided %v, %s acted on %v", decisions[i], g.server, g.acts[0])
			}
		}
		if acted {
			st.acted++
		}
		// A harmless variant must reach the JS server's handler, and a2a-go's
		// too when it is 0.3 JSON-RPC (a2a-go speaks 0.3 only).
		if c.accept && (len(got[0].acts) != 1 || c.rpc && !c.v10 && len(got[1].acts) != 1) {
			fail(c, "a request writ must accept was not acted on by every server of its version: %v", got)
		}
	}
	families := make([]string, 0, len(stats))
	for f := range stats {
		families = append(families, f)
	}
	sort.Strings(families)
	for _, f := range families {
		s := stats[f]
		t.Logf("%-18s %4d cases: writ refused %4d, accepted %4d (a server acted on %d, each as writ decided unless listed below)",
			f, s.cases, s.refused, s.cases-s.refused, s.acted)
	}
	if len(failures) > 0 {
		const show = 400
		for i, f := range failures {
			if i == show {
				t.Errorf("... and %d more", len(failures)-show)
				break
			}
			t.Error(f)
		}
		t.Fatalf("%d of %d cases: the agent would act on something other than what writ decided", len(failures), len(cases))
	}
}

// modelAgrees: a model acts exactly when the server did, on the same action;
// a value the model marks as not a JSON string matches whatever the server
// made of it.
func modelAgrees(m action, acts bool, real []action) bool {
	if !acts || len(real) != 1 {
		return !acts && len(real) == 0
	}
	r := real[0]
	for _, f := range []struct{ m, r *string }{{&m.TaskID, &r.TaskID}, {&m.ContextID, &r.ContextID}, {&m.PushURL, &r.PushURL}, {&m.ConfigID, &r.ConfigID}} {
		if *f.m == jsNotString {
			*f.m = *f.r
		}
	}
	return m == r
}

func trim(b []byte) string {
	const max = 400
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// TestDifferentialCasesAreWellFormed: the generator's baselines are what the
// captured SDK traffic looks like, and every family is present.
func TestDifferentialCasesAreWellFormed(t *testing.T) {
	cases := differentialCases()
	fams := map[string]int{}
	for _, c := range cases {
		fams[c.family]++
		if c.family == "baseline" {
			req, f := Parse(wire.Inbound{Method: c.method, Path: c.path, Header: c.header.Clone(), Body: c.body}, Options{})
			if f != nil {
				t.Errorf("%s: baseline refused: %s %s\n%s", c, f.Kind, f.Message, c.body)
				continue
			}
			if d := decided(req); d.TaskID != "mine" && d.ContextID != "ctx-mine" {
				t.Errorf("%s: baseline decided %v", c, d)
			}
		}
	}
	for _, f := range []string{"baseline", "envelope-fold", "envelope-dup", "envelope-escape", "envelope-odd-key",
		"key-order", "whitespace", "nested-envelope", "framing", "field-fold", "field-dup", "field-escape",
		"proto-alias", "type-confusion", "random"} {
		if fams[f] == 0 {
			t.Errorf("no %s cases", f)
		}
	}
}
