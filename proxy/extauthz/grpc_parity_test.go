package extauthz_test

import (
	"context"
	"errors"
	"regexp"
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

// grpcWorld is one writ (the one assembly) in front of a2a-go's gRPC agent
// (the clarifier, route / as behind Envoy), reachable two ways: the
// sidecar's gRPC listener, and the test Envoy with writ's gRPC ext_authz
// server, over one core, store and engine.
type grpcWorld struct {
	*proxytest.Harness
	agent   *seedagents.Agent
	sidecar string // the agent's gRPC listener
	envoy   *grpcEnvoy
	authz   string // envoy.grpc_listen
}

const grpcAgentName = "sanctions-screening-agent"

func newGRPCWorld(t *testing.T, mutate func(*config.Config)) *grpcWorld {
	t.Helper()
	up, err := seedagents.StartClarifier(seedagents.WithGRPC())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	deliverer := push.NewDeliverer(push.DelivererConfig{Client: guard.Client(5*time.Second, 1<<20),
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { deliverer.Close(context.Background()) })
	a := proxytest.SanctionsAgent(up.URL)
	a.Name, a.Route, a.Protocol, a.GRPCListen = grpcAgentName, "/", "a2a-grpc", "127.0.0.1:0"
	w := &grpcWorld{agent: up}
	w.Harness = proxytest.NewWith(t, []config.Agent{a}, func(c *config.Config) {
		c.Policies = []string{proxytest.PushPolicies(t)}
		c.Envoy.GRPCListen = "127.0.0.1:0"
		if mutate != nil {
			mutate(c)
		}
	}, deliverer)
	w.sidecar = w.Server.ListenerAddr("agents[0].grpc_listen")
	w.authz = w.Server.ListenerAddr("envoy.grpc_listen")
	if w.sidecar == "" || w.authz == "" {
		t.Fatal("a listener is missing")
	}
	w.envoy = newGRPCEnvoy(t, w.authz, strings.TrimPrefix(up.URL, "http://"), grpcAgentName)
	return w
}

// bearer is a per-call credential over h2c (loopback).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// a2aClient is a2a-go's own gRPC client to addr, as token.
func a2aClient(t *testing.T, addr, token string) *a2aclient.Client {
	t.Helper()
	c, err := a2aclient.NewFromEndpoints(t.Context(), []a2a.AgentInterface{{URL: addr, Transport: a2a.TransportProtocolGRPC}},
		a2aclient.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(token))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

func sendParams(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text},
		a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})}
}

// outcome is what a caller saw of one call: its code, the ErrorInfo
// reasons, and the message with task ids taken out.
type outcome struct {
	code    codes.Code
	reasons string
	message string
}

// decisionID is a decision id in a refusal's message: each call has its own.
var decisionID = regexp.MustCompile(`decision [0-9a-f]+`)

func outcomeOf(err error, ids ...string) outcome {
	if err == nil {
		return outcome{code: codes.OK}
	}
	var se interface{ GRPCStatus() *status.Status }
	st := status.Convert(err)
	if errors.As(err, &se) {
		st = se.GRPCStatus()
	}
	var rs []string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			rs = append(rs, info.GetReason())
		}
	}
	msg := decisionID.ReplaceAllString(st.Message(), "decision <decision>")
	for _, id := range ids {
		if id != "" {
			msg = strings.ReplaceAll(msg, id, "<id>")
		}
	}
	return outcome{code: st.Code(), reasons: strings.Join(rs, ","), message: msg}
}

// TestSecurityGRPCExtAuthzParity runs the same a2a-go gRPC calls through
// the sidecar's gRPC listener and through Envoy's gRPC ext_authz filter
// (the test Envoy) and compares what each caller saw: allowed sends and
// streams, the owner's get, another tenant's get, cancel, follow-up and
// subscription of the owner's task (not found, exactly as a missing task),
// denied callers with every denial code as ErrorInfo, the unauthenticated
// caller, and the cancel of a terminal task answered by writ without the
// agent asked.
//
// Threat: behind Envoy, a gRPC call is decided on something other than
// what the agent runs, or a denial, a foreign task or a lifecycle refusal
// reaches the gRPC client differently (or not at all) than through the
// sidecar, so a caller probes tasks or gets through where the sidecar
// would refuse. Defence: ext_authz reads the call's one framed message into
// the same edge as the sidecar's gRPC door and answers writ's own answers
// as the grpc-status, grpc-message and grpc-status-details-bin Envoy's
// local reply carries to the client.
func TestSecurityGRPCExtAuthzParity(t *testing.T) {
	w := newGRPCWorld(t, nil)
	ctx := t.Context()
	inv, ret := w.Token(proxytest.Investigator), w.Token(proxytest.RetailBot)
	doors := map[string]string{"sidecar": w.sidecar, "ext_authz": w.envoy.addr}

	// Tasks the store knows: created through the sidecar (ext_authz never
	// sees the agent's answers), one waiting for input, one completed.
	owner := a2aClient(t, w.sidecar, inv)
	res, err := owner.SendMessage(ctx, sendParams("Screen the beneficiary of PMT-771"))
	if err != nil {
		t.Fatal(err)
	}
	open := res.(*a2a.Task)
	res, err = owner.SendMessage(ctx, sendParams("Screen PMT-772"))
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*a2a.Task)
	res, err = owner.SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m-2", Role: a2a.MessageRoleUser,
		TaskID: done.ID, ContextID: done.ContextID, Parts: []a2a.Part{a2a.TextPart{Text: "UAE"}}}})
	if err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("completing the task: %v %v", res, err)
	}
	ids := []string{string(open.ID), string(done.ID), "no-such-task"}

	type call struct {
		name  string
		token string
		do    func(c *a2aclient.Client) error
	}
	calls := []call{
		{"send", inv, func(c *a2aclient.Client) error {
			r, err := c.SendMessage(ctx, sendParams("Screen Acme"))
			if err == nil && r.(*a2a.Task).Status.State != a2a.TaskStateInputRequired {
				return errors.New("not input-required")
			}
			return err
		}},
		{"stream", inv, func(c *a2aclient.Client) error {
			var last a2a.TaskState
			for ev, err := range c.SendStreamingMessage(ctx, sendParams("Screen Acme")) {
				if err != nil {
					return err
				}
				switch e := ev.(type) {
				case *a2a.Task:
					last = e.Status.State
				case *a2a.TaskStatusUpdateEvent:
					last = e.Status.State
				}
			}
			if last != a2a.TaskStateInputRequired {
				return errors.New("the stream ended in " + string(last))
			}
			return nil
		}},
		{"owner get", inv, func(c *a2aclient.Client) error {
			_, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: open.ID})
			return err
		}},
		{"foreign get", ret, func(c *a2aclient.Client) error {
			_, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: open.ID})
			return err
		}},
		{"missing get", ret, func(c *a2aclient.Client) error {
			_, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"})
			return err
		}},
		{"foreign cancel", ret, func(c *a2aclient.Client) error {
			_, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: open.ID})
			return err
		}},
		{"foreign follow-up", ret, func(c *a2aclient.Client) error {
			_, err := c.SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m-x", Role: a2a.MessageRoleUser,
				TaskID: open.ID, Parts: []a2a.Part{a2a.TextPart{Text: "x"}}}})
			return err
		}},
		{"foreign subscribe", ret, func(c *a2aclient.Client) error {
			for _, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: open.ID}) {
				return err
			}
			return errors.New("no answer")
		}},
		{"terminal cancel", inv, func(c *a2aclient.Client) error {
			_, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: done.ID})
			return err
		}},
		{"scope missing", w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "read"}), func(c *a2aclient.Client) error {
			_, err := c.SendMessage(ctx, sendParams("x"))
			return err
		}},
		{"too deep", w.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "delegate", Chain: []string{"a", "b", "c", "d"}}),
			func(c *a2aclient.Client) error {
				_, err := c.SendMessage(ctx, sendParams("x"))
				return err
			}},
		{"anonymous", "", func(c *a2aclient.Client) error {
			_, err := c.SendMessage(ctx, sendParams("x"))
			return err
		}},
	}
	want := map[string]outcome{
		"foreign get":       {codes.NotFound, "TASK_NOT_FOUND", ""},
		"foreign cancel":    {codes.NotFound, "TASK_NOT_FOUND", ""},
		"foreign follow-up": {codes.NotFound, "TASK_NOT_FOUND", ""},
		"foreign subscribe": {codes.NotFound, "TASK_NOT_FOUND", ""},
		"missing get":       {codes.NotFound, "TASK_NOT_FOUND", ""},
		"terminal cancel":   {codes.FailedPrecondition, "TASK_NOT_CANCELABLE", ""},
		"scope missing":     {codes.PermissionDenied, "SCOPE_MISSING", ""},
		"too deep":          {codes.PermissionDenied, "DEPTH_EXCEEDED", ""},
		"anonymous":         {codes.Unauthenticated, "UNAUTHENTICATED", ""},
	}
	for _, c := range calls {
		got := map[string]outcome{}
		for door, addr := range doors {
			before := len(w.agent.Requests())
			o := outcomeOf(c.do(a2aClient(t, addr, c.token)), ids...)
			got[door] = o
			reached := len(w.agent.Requests()) > before
			if reached != (o.code == codes.OK) {
				t.Errorf("%s through %s: %v, and the agent was reached: %v", c.name, door, o, reached)
			}
		}
		if got["sidecar"] != got["ext_authz"] {
			t.Errorf("%s: sidecar %+v, ext_authz %+v", c.name, got["sidecar"], got["ext_authz"])
		}
		w2, denied := want[c.name]
		if o := got["ext_authz"]; denied && (o.code != w2.code || !strings.Contains(o.reasons, w2.reasons)) || !denied && o.code != codes.OK {
			t.Errorf("%s: %+v, want %+v", c.name, o, w2)
		}
	}
	if got := outcomeOf(errors.New("x")); got.code == codes.OK {
		t.Fatal("outcomeOf reads no error as OK")
	}
	// What reached the agent through Envoy is what writ decided on: the
	// caller writ identified.
	obs := w.agent.Requests()
	last := obs[len(obs)-1]
	if !strings.Contains(last.Caller, `"agent_id":"payments-investigator"`) {
		t.Errorf("the agent saw writ-caller %q", last.Caller)
	}
	// The task ext_authz let through is not recorded (ext_authz sees no
	// answers): docs/envoy.md says so.
	if rec, ok, _ := w.Task(string(open.ID)); !ok || rec.Task.State != task.AwaitingInput {
		t.Errorf("record %+v", rec)
	}
}

// TestGRPCExtAuthzPushServedByWrit: a push-config operation writ keeps
// itself is answered by writ; Envoy's local reply to a gRPC call carries a
// status only, so through ext_authz it is refused UNIMPLEMENTED with the
// reason (and never reaches the agent, which would learn the caller's
// callback), where the sidecar answers it.
func TestGRPCExtAuthzPushServedByWrit(t *testing.T) {
	w := newGRPCWorld(t, nil)
	ctx := t.Context()
	inv := w.Token(proxytest.Investigator)
	owner := a2aClient(t, w.sidecar, inv)
	res, err := owner.SendMessage(ctx, sendParams("Screen Acme"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	cfg := &a2a.TaskPushConfig{TaskID: id, Config: a2a.PushConfig{ID: "cfg-1", URL: "http://127.0.0.1:9/cb", Token: "tok-1"}}
	if _, err := owner.SetTaskPushConfig(ctx, cfg); err != nil {
		t.Fatalf("through the sidecar: %v", err)
	}
	before := len(w.agent.Requests())
	_, err = a2aClient(t, w.envoy.addr, inv).SetTaskPushConfig(ctx, cfg)
	if o := outcomeOf(err); o.code != codes.Unimplemented || !strings.Contains(o.message, "ext_proc") {
		t.Errorf("through ext_authz: %+v", o)
	}
	if len(w.agent.Requests()) != before {
		t.Error("the push config reached the agent")
	}
	_, err = a2aClient(t, w.envoy.addr, inv).ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: id})
	if o := outcomeOf(err); o.code != codes.Unimplemented {
		t.Errorf("list through ext_authz: %+v", o)
	}
	// Another caller's push get is not found, through either door.
	for _, addr := range []string{w.sidecar, w.envoy.addr} {
		_, err := a2aClient(t, addr, w.Token(proxytest.RetailBot)).GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: id, ConfigID: "cfg-1"})
		if o := outcomeOf(err); o.code != codes.NotFound || !slices.Contains(strings.Split(o.reasons, ","), "TASK_NOT_FOUND") {
			t.Errorf("foreign push get at %s: %+v", addr, o)
		}
	}
}
