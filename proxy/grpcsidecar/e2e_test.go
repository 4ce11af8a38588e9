package grpcsidecar_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// world is writ in front of a2a-go's gRPC agents (a2agrpc), each on a gRPC
// listener of its own, built by the one assembly.
type world struct {
	*proxytest.Harness
	agent, slow *seedagents.Agent
	rcv         *proxytest.Receiver
	addr        string // the sanctions agent's gRPC listener
	slowAddr    string
}

func start(t *testing.T, f func(...seedagents.Option) (*seedagents.Agent, error), opts ...seedagents.Option) *seedagents.Agent {
	t.Helper()
	a, err := f(append(opts, seedagents.WithGRPC())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func grpcAgent(name, route string, up *seedagents.Agent) config.Agent {
	a := proxytest.SanctionsAgent(up.URL)
	a.Name, a.Route, a.Protocol, a.GRPCListen = name, route, "a2a-grpc", "127.0.0.1:0"
	return a
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{agent: start(t, seedagents.StartClarifier), slow: start(t, seedagents.StartSlow),
		rcv: proxytest.NewReceiver(t)}
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(t.Context()) })
	agents := []config.Agent{grpcAgent("sanctions-screening-agent", "/grpc", w.agent), grpcAgent("sanctions-slow", "/slow", w.slow)}
	w.Harness = proxytest.NewWith(t, agents, func(c *config.Config) {
		c.Policies = []string{proxytest.PushPolicies(t)}
		c.Limits.StreamIdleTimeout = 10 * time.Second
	}, deliverer)
	w.addr = w.Server.ListenerAddr("agents[0].grpc_listen")
	w.slowAddr = w.Server.ListenerAddr("agents[1].grpc_listen")
	if w.addr == "" || w.slowAddr == "" {
		t.Fatal("no gRPC listener")
	}
	return w
}

// bearer is a per-call credential over h2c (a test on loopback).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// client is a2a-go's own client over its gRPC transport, to addr, as token.
func client(t *testing.T, addr, token string) *a2aclient.Client {
	t.Helper()
	c, err := a2aclient.NewFromEndpoints(t.Context(), []a2a.AgentInterface{{URL: addr, Transport: a2a.TransportProtocolGRPC}},
		a2aclient.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(token))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

func msg(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text},
		a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})}
}

// reasons are the ErrorInfo reasons of a gRPC error, and its code.
func reasons(err error) (codes.Code, []string) {
	st := status.Convert(err)
	var out []string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			out = append(out, info.GetReason())
		}
	}
	return st.Code(), out
}

// grpcErr is the gRPC status under an a2a-go client error.
func grpcErr(t *testing.T, err error) error {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Err()
	}
	return err
}

// TestGRPCAgent drives writ's gRPC door with a2a-go's gRPC client in front
// of a2a-go's gRPC agent: every operation allowed and denied, two callers,
// push configs kept by writ, a stream to a terminal state, a cancel of a
// terminal task answered by writ.
func TestGRPCAgent(t *testing.T) {
	w := newWorld(t)
	inv := client(t, w.addr, w.Token(proxytest.Investigator))
	retail := client(t, w.addr, w.Token(proxytest.RetailBot))
	ctx := t.Context()

	// An allowed send: the clarifier asks a question (input-required),
	// writ records the task, owned by the caller.
	res, err := inv.SendMessage(ctx, msg("Screen the beneficiary of PMT-771"))
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := res.(*a2a.Task)
	if !ok || tk.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("send: %#v", res)
	}
	id := string(tk.ID)
	rec, ok, _ := w.Task(id)
	if !ok || rec.Task.State != task.AwaitingInput || rec.Task.Owner.AgentID != "payments-investigator" ||
		rec.Agent != "sanctions-screening-agent" || rec.Protocol != "a2a-grpc" {
		t.Fatalf("record %+v", rec)
	}
	obs := w.agent.Requests()
	last := obs[len(obs)-1]
	if last.Method != "/a2a.v1.A2AService/SendMessage" || !strings.Contains(last.Caller, `"agent_id":"payments-investigator"`) {
		t.Errorf("the agent saw %s with writ-caller %q", last.Method, last.Caller)
	}

	// Get, by its owner; another tenant's caller is told the task does not
	// exist, exactly as for a task that does not.
	got, err := inv.GetTask(ctx, &a2a.TaskQueryParams{ID: tk.ID})
	if err != nil || got.ID != tk.ID {
		t.Fatalf("get: %v %v", got, err)
	}
	_, ferr := retail.GetTask(ctx, &a2a.TaskQueryParams{ID: tk.ID})
	_, merr := retail.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"})
	fst, mst := status.Convert(grpcErr(t, ferr)), status.Convert(grpcErr(t, merr))
	if fst.Code() != codes.NotFound || strings.ReplaceAll(fst.Message(), id, "X") != strings.ReplaceAll(mst.Message(), "no-such-task", "X") {
		t.Errorf("foreign task %v, missing task %v", fst, mst)
	}
	if c, r := reasons(fst.Err()); c != codes.NotFound || !slices.Contains(r, "TASK_NOT_FOUND") {
		t.Errorf("foreign task: %v %v", c, r)
	}
	before := len(w.agent.Requests())
	if _, err := retail.CancelTask(ctx, &a2a.TaskIDParams{ID: tk.ID}); status.Code(grpcErr(t, err)) != codes.NotFound {
		t.Errorf("foreign cancel: %v", err)
	}
	if _, err := retail.SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m-x", Role: a2a.MessageRoleUser,
		TaskID: tk.ID, Parts: []a2a.Part{a2a.TextPart{Text: "x"}}}}); status.Code(grpcErr(t, err)) != codes.NotFound {
		t.Errorf("foreign follow-up: %v", err)
	}
	if len(w.agent.Requests()) != before {
		t.Error("a refused call reached the agent")
	}

	// Denied: every denial code reaches the caller as ErrorInfo details.
	for _, c := range []struct {
		token string
		code  codes.Code
		want  []string
	}{
		{w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "read"}), codes.PermissionDenied, []string{"SCOPE_MISSING"}},
		{w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "delegate", Chain: []string{"a", "b", "c", "d"}}), codes.PermissionDenied, []string{"DEPTH_EXCEEDED"}},
		{"", codes.Unauthenticated, []string{"UNAUTHENTICATED"}},
	} {
		_, err := client(t, w.addr, c.token).SendMessage(ctx, msg("x"))
		code, got := reasons(grpcErr(t, err))
		if code != c.code || !contains(got, c.want...) {
			t.Errorf("denied %v: %v %v", c.want, code, got)
		}
	}
	if len(w.agent.Requests()) != before {
		t.Error("a denied call reached the agent")
	}

	// Push: a callback the policy refuses; then one it allows, kept by writ
	// (the agent never sees it), served by writ, delivered by writ.
	cb := w.rcv.Srv.URL + "/cb"
	bad := msg("x")
	bad.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: "https://evil.example/hook", Token: "t"}}
	_, err = inv.SendMessage(ctx, bad)
	if _, r := reasons(grpcErr(t, err)); !contains(r, "CALLBACK_NOT_ALLOWED") {
		t.Errorf("refused callback: %v", r)
	}
	withPush := msg("Screen this entity")
	withPush.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{ID: "cfg-1", URL: cb, Token: "tok-1"}}
	res, err = inv.SendMessage(ctx, withPush)
	if err != nil {
		t.Fatal(err)
	}
	pt := res.(*a2a.Task)
	for _, o := range w.agent.Requests() {
		if strings.Contains(o.Body, w.rcv.Srv.URL) || strings.Contains(o.Body, "tok-1") {
			t.Fatalf("the agent received the push config: %s", o.Body)
		}
	}
	if last := w.agent.Requests(); !strings.Contains(last[len(last)-1].Body, "Screen this entity") {
		t.Fatalf("the agent did not get the message: %s", last[len(last)-1].Body)
	}
	cfgs, err := inv.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: pt.ID})
	if err != nil || len(cfgs) != 1 || cfgs[0].Config.URL != cb {
		t.Fatalf("push list: %v %v", cfgs, err)
	}
	one, err := inv.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: pt.ID, ConfigID: "cfg-1"})
	if err != nil || one.Config.Token != "tok-1" {
		t.Fatalf("push get: %v %v", one, err)
	}
	if _, err := retail.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: pt.ID, ConfigID: "cfg-1"}); status.Code(grpcErr(t, err)) != codes.NotFound {
		t.Errorf("foreign push get: %v", err)
	}
	if _, err := inv.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: pt.ID, Config: a2a.PushConfig{ID: "cfg-2", URL: cb, Token: "tok-2"}}); err != nil {
		t.Fatalf("push set: %v", err)
	}
	if err := inv.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: pt.ID, ConfigID: "cfg-2"}); err != nil {
		t.Fatalf("push delete: %v", err)
	}
	// The follow-up completes the task; writ posts the state change.
	res, err = inv.SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m-2", Role: a2a.MessageRoleUser,
		TaskID: pt.ID, ContextID: pt.ContextID, Parts: []a2a.Part{a2a.TextPart{Text: "UAE"}}}})
	if err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("follow-up: %v %v", res, err)
	}
	hdrs, _ := w.rcv.WaitFor(t, "completed")
	if hdrs[len(hdrs)-1].Get("X-A2A-Notification-Token") != "tok-1" {
		t.Errorf("notification headers %v", hdrs[len(hdrs)-1])
	}

	// Cancel of a terminal task: answered by writ, the agent never asked.
	before = len(w.agent.Requests())
	_, err = inv.CancelTask(ctx, &a2a.TaskIDParams{ID: pt.ID})
	if code, r := reasons(grpcErr(t, err)); code != codes.FailedPrecondition || !contains(r, "TASK_NOT_CANCELABLE") {
		t.Errorf("cancel of a terminal task: %v %v", code, r)
	}
	if len(w.agent.Requests()) != before {
		t.Error("the cancel of a terminal task reached the agent")
	}

	// The extended card: a2a-go's agent has none, and says so.
	if _, err := inv.GetAgentCard(ctx); err == nil {
		t.Error("extended card: no error")
	}
}

// TestGRPCStream: a streamed send is relayed event by event to its
// terminal state, each event observed; a subscription to another's task is
// not found; a running task is cancelled through writ.
func TestGRPCStream(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	inv := client(t, w.addr, w.Token(proxytest.Investigator))
	var states []a2a.TaskState
	var id a2a.TaskID
	for ev, err := range inv.SendStreamingMessage(ctx, msg("Screen Acme")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			id = e.ID
			states = append(states, e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, e.Status.State)
		}
	}
	if len(states) == 0 || states[len(states)-1] != a2a.TaskStateInputRequired {
		t.Fatalf("stream states %v", states)
	}
	rec, ok, _ := w.Task(string(id))
	if !ok || rec.Task.State != task.AwaitingInput {
		t.Fatalf("record %+v", rec)
	}

	// The slow agent: a stream, then a cancel through writ while it runs,
	// then the subscription of another caller is not found.
	slow := client(t, w.slowAddr, w.Token(proxytest.Investigator))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	var sid a2a.TaskID
	for ev, err := range slow.SendStreamingMessage(sctx, msg("Screen slowly")) {
		if err != nil {
			t.Fatal(err)
		}
		if tk, ok := ev.(*a2a.Task); ok {
			sid = tk.ID
			break
		}
	}
	stop()
	if sid == "" {
		t.Fatal("no task")
	}
	retail := client(t, w.slowAddr, w.Token(proxytest.RetailBot))
	yields := 0
	for _, err := range retail.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: sid}) {
		yields++
		if status.Code(grpcErr(t, err)) != codes.NotFound {
			t.Errorf("foreign subscribe: %v", err)
		}
		break
	}
	if yields == 0 {
		t.Error("foreign subscribe: no answer")
	}
	cancelled, err := slow.CancelTask(ctx, &a2a.TaskIDParams{ID: sid})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", cancelled, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, _, _ := w.Task(string(sid))
		if rec.Task.State == task.Cancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancel was not recorded: %+v", rec.Task)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func contains(got []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
