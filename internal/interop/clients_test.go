package interop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/writ-authz/writ/internal/peers"
)

// cell is one door × client × agent: its caller and where it goes.
type cell struct {
	id           string // the caller's agent id, unique to the cell
	door         *running
	client       string
	agent        string
	token        string
	pushURL      string
	pushToken    string
	fastPath     string // the agent's route
	slowPath     string // the route of a task that waits until cancelled
	sentTask     string // filled by the client: the send's task
	streamedTask string
}

// outcome is what one operation of a client did: an error when the SDK (or,
// for plain HTTP, the test's own reading of the wire) refused the answer or
// the answer was not what the agent does; the task it acted on.
type outcome struct {
	err    error
	taskID string
	// to is the state writ should have recorded for taskID (internal words).
	to string
}

func failf(format string, a ...any) *outcome { return &outcome{err: fmt.Errorf(format, a...)} }

// notApplicable says which operations a client and an agent cannot do
// together, and why, before the door adds its own.
func notApplicable(client, agent string) (all string, ops map[Op]string) {
	ops = map[Op]string{}
	isA2A := client != clientHTTP
	switch {
	case isA2A && agent == agentACP:
		return "An A2A SDK client does not speak ACP (writ forwards each protocol as it is; it does not translate).", nil
	case client == clientJSREST && agent == agentGo:
		return "The a2a-go 0.3 server serves JSON-RPC only (no HTTP+JSON binding).", nil
	}
	if agent == agentGo {
		ops[List] = "A2A 0.3 has no tasks/list."
	}
	if client == clientGo {
		ops[List] = "A2A 0.3 has no tasks/list (the a2a-go v0.3.3 client has no ListTasks)."
	}
	if agent == agentACP {
		ops[Subscribe] = "ACP 0.2 has no subscribe (GET /runs/{id}/events is a read of past events, decided as get)."
		ops[List] = "ACP lists runs by session (GET /session/{id}); the seed's ACP server has no session endpoint."
		ops[Push] = "ACP has no push notifications."
	}
	return "", ops
}

// runJS runs the @a2a-js/sdk client (interop-client.mjs) for every
// applicable operation, in one node process.
func runJS(t *testing.T, c *cell, binding string, ops []Op) map[Op]*outcome {
	args := []string{"--url", c.door.base + c.fastPath + "/", "--token", c.token, "--binding", binding,
		"--push-url", c.pushURL, "--push-token", c.pushToken, "--ops", joinOps(ops), "--timeout", "60000"}
	if c.agent == agentGo {
		args = append(args, "--legacy", "--slow-url", c.door.base+c.slowPath+"/")
	}
	lines, err := peers.RunScript(t, 90*time.Second, "interop-client.mjs", args...)
	out := map[Op]*outcome{}
	for _, l := range lines {
		op := Op(str(l["op"]))
		if e, ok := l["error"].(map[string]any); ok {
			if op == "card" || op == "timeout" || op == "internal" {
				for _, o := range ops {
					if out[o] == nil {
						out[o] = failf("%s: %v (%v)", op, e["message"], e["code"])
					}
				}
				continue
			}
			out[op] = failf("%s %v: %v", str(e["name"]), e["code"], e["message"])
			continue
		}
		out[op] = checkJS(c, op, l)
	}
	for _, o := range ops {
		if out[o] == nil {
			out[o] = failf("the client printed nothing for %s (exit: %v)", o, err)
		}
	}
	return out
}

// checkJS checks one operation's line against what the agent does.
func checkJS(c *cell, op Op, l map[string]any) *outcome {
	id, state := str(l["taskId"]), str(l["state"])
	states := strs(l["states"])
	last := ""
	if len(states) > 0 {
		last = states[len(states)-1]
	}
	switch op {
	case Send:
		c.sentTask = id
		if id == "" || state != "completed" {
			return failf("send: %v", l)
		}
		return &outcome{taskID: id, to: "succeeded"}
	case Stream:
		c.streamedTask = id
		if id == "" || last != "completed" {
			return failf("stream: %v", l)
		}
		return &outcome{taskID: id, to: "succeeded"}
	case Get:
		if id == "" || id != c.sentTask || state != "completed" {
			return failf("get: %v (sent %s)", l, c.sentTask)
		}
		return &outcome{taskID: id}
	case List:
		return checkList(c, strs(l["ids"]))
	case Cancel:
		if id == "" || state != "canceled" {
			return failf("cancel: %v", l)
		}
		return &outcome{taskID: id, to: "cancelled"}
	case Subscribe:
		if id == "" || last != "canceled" {
			return failf("subscribe: %v", l)
		}
		return &outcome{taskID: id}
	case Push:
		listed, _ := l["listed"].(float64)
		after, _ := l["listedAfterDelete"].(float64)
		if id == "" || state != "completed" || str(l["setId"]) == "" || str(l["gotUrl"]) != c.pushURL || listed < 1 || after != listed-1 {
			return failf("push: %v", l)
		}
		return &outcome{taskID: id, to: "succeeded"}
	}
	return failf("unexpected line %v", l)
}

// checkList: the caller's task is listed, and where writ sees answers the
// listing holds the caller's tasks only.
func checkList(c *cell, ids []string) *outcome {
	if !slices.Contains(ids, c.sentTask) {
		return failf("list: %v does not hold the sent task %s", ids, c.sentTask)
	}
	if c.door.records {
		for _, id := range ids {
			if id != c.sentTask && id != c.streamedTask {
				return failf("list: %s is not this caller's task (%v)", id, ids)
			}
		}
	}
	return &outcome{taskID: c.sentTask}
}

// runGo runs the a2a-go v0.3.3 client: from the card writ serves (the a2a-go
// agent's 0.3 card) or, for the JS agent whose card is 1.0, from the endpoint
// its card lists for 0.3 (the 0.3 client cannot read a 1.0 card).
func runGo(t *testing.T, c *cell, ops []Op) map[Op]*outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[Op]*outcome{}
	all := func(err error) map[Op]*outcome {
		for _, o := range ops {
			out[o] = &outcome{err: err}
		}
		return out
	}
	connect := func(path string) (*a2aclient.Client, error) {
		auth := a2aclient.WithInterceptors(bearer(c.token))
		if c.agent == agentJS {
			return a2aclient.NewFromEndpoints(ctx, []a2a.AgentInterface{{URL: c.door.base + path + "/", Transport: a2a.TransportProtocolJSONRPC}}, auth)
		}
		card, err := agentcard.DefaultResolver.Resolve(ctx, c.door.base+path, agentcard.WithRequestHeader("Authorization", "Bearer "+c.token))
		if err != nil {
			return nil, fmt.Errorf("card: %w", err)
		}
		return a2aclient.NewFromCard(ctx, card, auth)
	}
	fast, err := connect(c.fastPath)
	if err != nil {
		return all(err)
	}
	slow, err := connect(c.slowPath)
	if err != nil {
		return all(err)
	}
	msg := func(text string) *a2a.Message {
		return a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text}, a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})
	}
	has := func(op Op) bool { return slices.Contains(ops, op) }
	blocking, nonBlocking := true, false

	if has(Send) {
		res, err := fast.SendMessage(ctx, &a2a.MessageSendParams{Message: msg("Screen the beneficiary of PMT-771"), Config: &a2a.MessageSendConfig{Blocking: &blocking}})
		out[Send] = goTask(res, err, a2a.TaskStateCompleted, "succeeded")
		c.sentTask = out[Send].taskID
	}
	if has(Stream) {
		var states []a2a.TaskState
		var id a2a.TaskID
		var serr error
		for ev, err := range fast.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg("Screen the beneficiary of PMT-772")}) {
			if err != nil {
				serr = err
				break
			}
			switch e := ev.(type) {
			case *a2a.Task:
				id, states = e.ID, append(states, e.Status.State)
			case *a2a.TaskStatusUpdateEvent:
				id, states = e.TaskID, append(states, e.Status.State)
			}
		}
		switch {
		case serr != nil:
			out[Stream] = &outcome{err: serr}
		case len(states) == 0 || states[len(states)-1] != a2a.TaskStateCompleted:
			out[Stream] = failf("stream states %v", states)
		default:
			out[Stream] = &outcome{taskID: string(id), to: "succeeded"}
		}
		c.streamedTask = string(id)
	}
	if has(Get) {
		task, err := fast.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(c.sentTask)})
		switch {
		case err != nil:
			out[Get] = &outcome{err: err}
		case string(task.ID) != c.sentTask || task.Status.State != a2a.TaskStateCompleted:
			out[Get] = failf("get: %s %s", task.ID, task.Status.State)
		default:
			out[Get] = &outcome{taskID: c.sentTask}
		}
	}
	if has(Cancel) || has(Subscribe) {
		res, err := slow.SendMessage(ctx, &a2a.MessageSendParams{Message: msg("slow screening, cancel me"), Config: &a2a.MessageSendConfig{Blocking: &nonBlocking}})
		started := goTask(res, err, "", "")
		if started.err != nil {
			out[Cancel], out[Subscribe] = started, started
		} else {
			id := a2a.TaskID(started.taskID)
			first := make(chan struct{})
			subDone := make(chan *outcome, 1)
			go func() {
				var states []a2a.TaskState
				once := false
				for ev, err := range slow.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: id}) {
					if !once {
						once = true
						close(first)
					}
					if err != nil {
						subDone <- &outcome{err: err}
						return
					}
					switch e := ev.(type) {
					case *a2a.Task:
						states = append(states, e.Status.State)
					case *a2a.TaskStatusUpdateEvent:
						states = append(states, e.Status.State)
					}
				}
				if !once {
					close(first)
				}
				if len(states) == 0 || states[len(states)-1] != a2a.TaskStateCanceled {
					subDone <- failf("subscribe states %v", states)
					return
				}
				subDone <- &outcome{taskID: string(id)}
			}()
			select {
			case <-first:
			case <-time.After(5 * time.Second):
			}
			if has(Cancel) {
				task, err := slow.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
				switch {
				case err != nil:
					out[Cancel] = &outcome{err: err}
				case task.Status.State != a2a.TaskStateCanceled:
					out[Cancel] = failf("cancel: %s", task.Status.State)
				default:
					out[Cancel] = &outcome{taskID: string(id), to: "cancelled"}
				}
			}
			if has(Subscribe) {
				out[Subscribe] = <-subDone
			}
		}
	}
	if has(Push) {
		out[Push] = goPush(ctx, fast, c, msg("Screen with a callback"))
	}
	return out
}

func goTask(res a2a.SendMessageResult, err error, want a2a.TaskState, to string) *outcome {
	if err != nil {
		return &outcome{err: err}
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		return failf("the answer is a %T, not a task", res)
	}
	if want != "" && task.Status.State != want {
		return failf("task %s is %s, want %s", task.ID, task.Status.State, want)
	}
	return &outcome{taskID: string(task.ID), to: to}
}

func goPush(ctx context.Context, cl *a2aclient.Client, c *cell, m *a2a.Message) *outcome {
	blocking := true
	res, err := cl.SendMessage(ctx, &a2a.MessageSendParams{Message: m, Config: &a2a.MessageSendConfig{Blocking: &blocking,
		PushConfig: &a2a.PushConfig{URL: c.pushURL, Token: c.pushToken}}})
	o := goTask(res, err, a2a.TaskStateCompleted, "succeeded")
	if o.err != nil {
		return o
	}
	id := a2a.TaskID(o.taskID)
	set, err := cl.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: id, Config: a2a.PushConfig{ID: "cfg-interop", URL: c.pushURL, Token: c.pushToken}})
	if err != nil {
		return &outcome{err: fmt.Errorf("set: %w", err)}
	}
	got, err := cl.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: id, ConfigID: set.Config.ID})
	if err != nil {
		return &outcome{err: fmt.Errorf("get: %w", err)}
	}
	listed, err := cl.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: id})
	if err != nil {
		return &outcome{err: fmt.Errorf("list: %w", err)}
	}
	if err := cl.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: id, ConfigID: set.Config.ID}); err != nil {
		return &outcome{err: fmt.Errorf("delete: %w", err)}
	}
	after, err := cl.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: id})
	if err != nil {
		return &outcome{err: fmt.Errorf("list after delete: %w", err)}
	}
	if set.Config.ID == "" || got.Config.URL != c.pushURL || len(listed) < 1 || len(after) != len(listed)-1 {
		return failf("push configs: set %q, got %q, listed %d then %d", set.Config.ID, got.Config.URL, len(listed), len(after))
	}
	return o
}

// bearer adds the caller's token to every a2a-go call.
type bearer string

func (b bearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(b)}
	return ctx, nil
}

func (bearer) After(context.Context, *a2aclient.Response) error { return nil }

func joinOps(ops []Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, ",")
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, str(x))
	}
	return out
}
