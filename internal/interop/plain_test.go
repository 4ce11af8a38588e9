package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// plain is a client with no SDK: net/http and the wire shapes of each
// protocol (A2A 1.0 JSON-RPC to the JS agent, A2A 0.3 JSON-RPC to the a2a-go
// agent, ACP REST to the ACP agent), read strictly by the test.
type plain struct {
	c    *cell
	http *http.Client
	ctx  context.Context
	v10  bool
	n    atomic.Int64
}

func runPlain(c *cell, ops []Op) map[Op]*outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := &plain{c: c, http: &http.Client{}, ctx: ctx, v10: c.agent == agentJS}
	if c.agent == agentACP {
		return p.acp(ops)
	}
	return p.a2a(ops)
}

// do sends one request and returns the status and the body (or the SSE
// events' data, one per element, when the answer is a stream).
func (p *plain) do(method, path string, body any) (int, []json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(p.ctx, method, p.c.door.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.v10 {
		req.Header.Set("A2A-Version", "1.0")
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var evs []json.RawMessage
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				evs = append(evs, json.RawMessage(strings.TrimSpace(d)))
			}
		}
		return resp.StatusCode, evs, sc.Err()
	}
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, []json.RawMessage{b}, err
}

// rpc calls one JSON-RPC method and returns the results (one, or one per
// stream event); a JSON-RPC error is an error.
func (p *plain) rpc(path, method string, params any) ([]json.RawMessage, error) {
	n := p.n.Add(1)
	st, bodies, err := p.do(http.MethodPost, path, map[string]any{"jsonrpc": "2.0", "id": n, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, b := range bodies {
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      any             `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &env); err != nil || env.JSONRPC != "2.0" {
			return nil, fmt.Errorf("%s: HTTP %d, not JSON-RPC: %.200s", method, st, b)
		}
		if env.Error != nil {
			return nil, fmt.Errorf("%s: error %d %s", method, env.Error.Code, env.Error.Message)
		}
		if fmt.Sprint(env.ID) != fmt.Sprint(n) {
			return nil, fmt.Errorf("%s: id %v, want %d", method, env.ID, n)
		}
		out = append(out, env.Result)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: HTTP %d and no answer", method, st)
	}
	return out, nil
}

// taskState reads a task id and state from any A2A result or event shape:
// 1.0 ({task}, {statusUpdate}, a bare Task) and 0.3 (kind task or
// status-update); states come back in the 0.3 words.
func taskState(raw json.RawMessage) (id, state string) {
	type status struct {
		State string `json:"state"`
	}
	var r struct {
		ID     string `json:"id"`
		TaskID string `json:"taskId"`
		Status status `json:"status"`
		Task   *struct {
			ID     string `json:"id"`
			Status status `json:"status"`
		} `json:"task"`
		StatusUpdate *struct {
			TaskID string `json:"taskId"`
			Status status `json:"status"`
		} `json:"statusUpdate"`
	}
	_ = json.Unmarshal(raw, &r)
	switch {
	case r.Task != nil:
		id, state = r.Task.ID, r.Task.Status.State
	case r.StatusUpdate != nil:
		id, state = r.StatusUpdate.TaskID, r.StatusUpdate.Status.State
	case r.TaskID != "":
		id, state = r.TaskID, r.Status.State
	default:
		id, state = r.ID, r.Status.State
	}
	state = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(state, "TASK_STATE_")), "_", "-")
	return id, state
}

func (p *plain) message(text string) map[string]any {
	id := fmt.Sprintf("m-%d", time.Now().UnixNano())
	if p.v10 {
		return map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{
			map[string]any{"text": text}, map[string]any{"data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}
	}
	return map[string]any{"kind": "message", "messageId": id, "role": "user", "parts": []any{
		map[string]any{"kind": "text", "text": text}, map[string]any{"kind": "data", "data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}
}

// a2a drives the A2A agents: 1.0 method names to the JS agent, 0.3 to the
// a2a-go agent.
func (p *plain) a2a(ops []Op) map[Op]*outcome {
	out := map[Op]*outcome{}
	has := func(op Op) bool { return slices.Contains(ops, op) }
	m := map[string]string{"send": "message/send", "stream": "message/stream", "get": "tasks/get", "cancel": "tasks/cancel",
		"subscribe": "tasks/resubscribe", "pset": "tasks/pushNotificationConfig/set", "pget": "tasks/pushNotificationConfig/get",
		"plist": "tasks/pushNotificationConfig/list", "pdel": "tasks/pushNotificationConfig/delete"}
	if p.v10 {
		m = map[string]string{"send": "SendMessage", "stream": "SendStreamingMessage", "get": "GetTask", "cancel": "CancelTask",
			"subscribe": "SubscribeToTask", "list": "ListTasks", "pset": "CreateTaskPushNotificationConfig",
			"pget": "GetTaskPushNotificationConfig", "plist": "ListTaskPushNotificationConfigs", "pdel": "DeleteTaskPushNotificationConfig"}
	}
	fast, slow := p.c.fastPath+"/", p.c.slowPath+"/"
	config := func(immediate bool, push bool) map[string]any {
		cfg := map[string]any{"acceptedOutputModes": []string{"text/plain", "application/json"}}
		pc := map[string]any{"url": p.c.pushURL, "token": p.c.pushToken}
		if p.v10 {
			if immediate {
				cfg["returnImmediately"] = true
			}
			if push {
				cfg["taskPushNotificationConfig"] = pc
			}
		} else {
			cfg["blocking"] = !immediate
			if push {
				cfg["pushNotificationConfig"] = pc
			}
		}
		return cfg
	}
	send := func(path, text string, immediate, push bool, want, to string) *outcome {
		res, err := p.rpc(path, m["send"], map[string]any{"message": p.message(text), "configuration": config(immediate, push)})
		if err != nil {
			return &outcome{err: err}
		}
		id, st := taskState(res[0])
		if id == "" || (want != "" && st != want) {
			return failf("send: %.300s", res[0])
		}
		return &outcome{taskID: id, to: to}
	}
	stream := func(path, method string, params any, want string) *outcome {
		evs, err := p.rpc(path, method, params)
		if err != nil {
			return &outcome{err: err}
		}
		id, last := "", ""
		for _, e := range evs {
			i, s := taskState(e)
			if i != "" {
				id = i
			}
			if s != "" {
				last = s
			}
		}
		if id == "" || last != want {
			return failf("%s: %d events, last state %q", method, len(evs), last)
		}
		return &outcome{taskID: id}
	}

	if has(Send) {
		out[Send] = send(fast, "Screen the beneficiary of PMT-771", false, false, "completed", "succeeded")
		p.c.sentTask = out[Send].taskID
	}
	if has(Stream) {
		o := stream(fast, m["stream"], map[string]any{"message": p.message("Screen the beneficiary of PMT-772")}, "completed")
		o.to = "succeeded"
		out[Stream], p.c.streamedTask = o, o.taskID
	}
	if has(Get) {
		res, err := p.rpc(fast, m["get"], map[string]any{"id": p.c.sentTask})
		if err != nil {
			out[Get] = &outcome{err: err}
		} else if id, st := taskState(res[0]); id != p.c.sentTask || st != "completed" {
			out[Get] = failf("get: %.300s", res[0])
		} else {
			out[Get] = &outcome{taskID: id}
		}
	}
	if has(List) {
		res, err := p.rpc(fast, m["list"], map[string]any{"pageSize": 100})
		if err != nil {
			out[List] = &outcome{err: err}
		} else {
			var l struct {
				Tasks []struct {
					ID string `json:"id"`
				} `json:"tasks"`
			}
			_ = json.Unmarshal(res[0], &l)
			var ids []string
			for _, t := range l.Tasks {
				ids = append(ids, t.ID)
			}
			out[List] = checkList(p.c, ids)
		}
	}
	if has(Cancel) || has(Subscribe) {
		text := "slow screening, cancel me"
		started := send(slow, text, true, false, "", "")
		if started.err != nil {
			out[Cancel], out[Subscribe] = started, started
		} else {
			subDone := make(chan *outcome, 1)
			if has(Subscribe) {
				go func() { subDone <- stream(slow, m["subscribe"], map[string]any{"id": started.taskID}, "canceled") }()
				time.Sleep(300 * time.Millisecond) // let the subscription reach the agent first
			}
			if has(Cancel) {
				res, err := p.rpc(slow, m["cancel"], map[string]any{"id": started.taskID})
				if err != nil {
					out[Cancel] = &outcome{err: err}
				} else if id, st := taskState(res[0]); id != started.taskID || st != "canceled" {
					out[Cancel] = failf("cancel: %.300s", res[0])
				} else {
					out[Cancel] = &outcome{taskID: id, to: "cancelled"}
				}
			}
			if has(Subscribe) {
				out[Subscribe] = <-subDone
			}
		}
	}
	if has(Push) {
		out[Push] = p.push(m, fast, send(fast, "Screen with a callback", false, true, "completed", "succeeded"))
	}
	return out
}

func (p *plain) push(m map[string]string, path string, sent *outcome) *outcome {
	if sent.err != nil {
		return sent
	}
	id := sent.taskID
	set := map[string]any{"taskId": id, "pushNotificationConfig": map[string]any{"id": "cfg-interop", "url": p.c.pushURL, "token": p.c.pushToken}}
	ref := map[string]any{"id": id, "pushNotificationConfigId": "cfg-interop"}
	list := map[string]any{"id": id}
	if p.v10 {
		set = map[string]any{"taskId": id, "id": "cfg-interop", "url": p.c.pushURL, "token": p.c.pushToken}
		ref = map[string]any{"taskId": id, "id": "cfg-interop"}
		list = map[string]any{"taskId": id}
	}
	count := func() (int, error) {
		res, err := p.rpc(path, m["plist"], list)
		if err != nil {
			return 0, err
		}
		var arr []json.RawMessage
		if json.Unmarshal(res[0], &arr) == nil { // 0.3: a list
			return len(arr), nil
		}
		var obj struct {
			Configs []json.RawMessage `json:"configs"`
		}
		err = json.Unmarshal(res[0], &obj)
		return len(obj.Configs), err
	}
	if _, err := p.rpc(path, m["pset"], set); err != nil {
		return &outcome{err: err}
	}
	res, err := p.rpc(path, m["pget"], ref)
	if err != nil {
		return &outcome{err: err}
	}
	if !strings.Contains(string(res[0]), p.c.pushURL) {
		return failf("push get: %.300s", res[0])
	}
	before, err := count()
	if err != nil {
		return &outcome{err: err}
	}
	if _, err := p.rpc(path, m["pdel"], ref); err != nil {
		return &outcome{err: err}
	}
	after, err := count()
	if err != nil {
		return &outcome{err: err}
	}
	if before < 1 || after != before-1 {
		return failf("push configs listed %d, then %d after a delete", before, after)
	}
	return sent
}

// acp drives the ACP agent over its REST API.
func (p *plain) acp(ops []Op) map[Op]*outcome {
	out := map[Op]*outcome{}
	has := func(op Op) bool { return slices.Contains(ops, op) }
	base := p.c.fastPath
	run := func(mode string) map[string]any {
		return map[string]any{"agent_name": "kyc-refresh-agent", "mode": mode, "input": []any{map[string]any{"role": "user",
			"parts": []any{map[string]any{"content_type": "text/plain", "content": "Refresh KYC for customer 1042"}}}}}
	}
	type runAnswer struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	decode := func(st int, bodies []json.RawMessage, err error, wantStatus int) (runAnswer, error) {
		var a runAnswer
		if err != nil {
			return a, err
		}
		if st != wantStatus || len(bodies) != 1 || json.Unmarshal(bodies[0], &a) != nil || a.RunID == "" {
			return a, fmt.Errorf("HTTP %d: %.300s", st, bodies)
		}
		return a, nil
	}
	if has(Send) {
		st, b, err := p.do(http.MethodPost, base+"/runs", run("sync"))
		a, err := decode(st, b, err, http.StatusOK)
		switch {
		case err != nil:
			out[Send] = &outcome{err: err}
		case a.Status != "completed":
			out[Send] = failf("sync run: %s", a.Status)
		default:
			out[Send] = &outcome{taskID: a.RunID, to: "succeeded"}
		}
		p.c.sentTask = a.RunID
	}
	if has(Stream) {
		st, evs, err := p.do(http.MethodPost, base+"/runs", run("stream"))
		id, last := "", ""
		for _, e := range evs {
			var ev struct {
				Type string    `json:"type"`
				Run  runAnswer `json:"run"`
			}
			_ = json.Unmarshal(e, &ev)
			if ev.Run.RunID != "" {
				id, last = ev.Run.RunID, ev.Type
			}
		}
		if err != nil || st != http.StatusOK || id == "" || last != "run.completed" {
			out[Stream] = failf("stream run: HTTP %d, %d events, last %q, %v", st, len(evs), last, err)
		} else {
			out[Stream] = &outcome{taskID: id, to: "succeeded"}
		}
	}
	if has(Get) {
		st, b, err := p.do(http.MethodGet, base+"/runs/"+p.c.sentTask, nil)
		a, err := decode(st, b, err, http.StatusOK)
		st2, b2, err2 := p.do(http.MethodGet, base+"/runs/"+p.c.sentTask+"/events", nil)
		switch {
		case err != nil:
			out[Get] = &outcome{err: err}
		case a.RunID != p.c.sentTask || a.Status != "completed":
			out[Get] = failf("get run: %+v", a)
		case err2 != nil || st2 != http.StatusOK || len(b2) != 1 || !strings.Contains(string(b2[0]), `"events"`):
			out[Get] = failf("run events: HTTP %d %.200s %v", st2, b2, err2)
		default:
			out[Get] = &outcome{taskID: a.RunID}
		}
	}
	if has(Cancel) {
		st, b, err := p.do(http.MethodPost, base+"/runs", run("async"))
		a, err := decode(st, b, err, http.StatusAccepted)
		if err != nil {
			// Some servers answer an async run with 200.
			a, err = decode(st, b, nil, st)
		}
		if err != nil {
			out[Cancel] = &outcome{err: err}
		} else {
			st, b, err := p.do(http.MethodPost, base+"/runs/"+a.RunID+"/cancel", nil)
			c, err := decode(st, b, err, http.StatusAccepted)
			switch {
			case err != nil:
				out[Cancel] = &outcome{err: err}
			case c.Status != "cancelled" && c.Status != "cancelling":
				out[Cancel] = failf("cancel run: %+v", c)
			default:
				out[Cancel] = &outcome{taskID: a.RunID, to: "cancelled"}
			}
		}
	}
	return out
}
