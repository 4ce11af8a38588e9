package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/writ-authz/writ/adapters"
	a2aadapter "github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/adapters/acp"
	"github.com/writ-authz/writ/task"
)

// 1. Discovery

func (s Discovery) run(ctx context.Context, st *Stage, r *recorder) {
	r.say("  GET %s: writ asks the policy (operation \"discover\") about every agent", adapters.DirectoryPath)
	r.say("  and lists only those this caller may see; ?tags= ranks and filters by skill tags.")
	for _, v := range s.Views {
		path, label := adapters.DirectoryPath, v.Who
		if v.Tags != "" {
			path += "?tags=" + v.Tags
			label += ", tags=" + v.Tags
		}
		status, body, err := st.get(ctx, path, &v.Caller)
		var dir struct {
			Agents []struct {
				Name         string `json:"name"`
				Version      string `json:"version"`
				Capabilities struct {
					Streaming bool `json:"streaming"`
				} `json:"capabilities"`
				Skills []struct {
					ID string `json:"id"`
				} `json:"skills"`
			} `json:"agents"`
		}
		if !r.check("the directory as "+label, err == nil && status == 200 && json.Unmarshal(body, &dir) == nil,
			fmt.Sprintf("HTTP %d, %s: %.200s", status, errText(err), body), "HTTP 200 with a directory") {
			continue
		}
		var names, lines []string
		for _, a := range dir.Agents {
			names = append(names, a.Name)
			var skills []string
			for _, s := range a.Skills {
				skills = append(skills, s.ID)
			}
			lines = append(lines, fmt.Sprintf("    %-27s v%-6s skills=%v streaming=%v", a.Name, a.Version, skills, a.Capabilities.Streaming))
		}
		if !v.Detail {
			lines = []string{"    " + strings.Join(names, ", ")}
		}
		r.say("")
		r.say("  %s:", label)
		r.verdict(strings.Join(lines, "\n"), "the directory as "+label, slices.Equal(names, v.Want), names, v.Want)
		if v.Hidden != nil {
			var hidden []string
			for _, a := range agents {
				if why, ok := v.Hidden[a.name]; ok && !slices.Contains(names, a.name) {
					hidden = append(hidden, a.name+" ("+why+")")
				}
			}
			r.say("    hidden: %s", strings.Join(hidden, "; "))
		}
	}
}

// 2. Admission

func (s Admission) run(ctx context.Context, st *Stage, r *recorder) {
	c := s.Caller
	r.say("  %s (user %s, tenant %s, data %s, acting for %s)", c.Agent, c.User, c.Tenant, c.Class, strings.Join(c.Chain, " > "))
	r.say("  sends message/send through writ; a refusal lists the policy's codes in error.data:")
	r.say("")
	for _, tc := range s.Cases {
		res, f, err := st.send(ctx, tc.Route, tc.Caller, newMessage(s.Text))
		verdict, want := "", "ALLOW"
		if tc.Want != nil {
			want = strings.Join(tc.Want, ", ")
		}
		switch {
		case f != nil:
			verdict = f.Codes()
			if f.Reason() != "PERMISSION_DENIED" {
				verdict = fmt.Sprintf("%d %s %s", f.Code, f.Reason(), verdict)
			}
		case err != nil:
			verdict = "error: " + err.Error()
		default:
			if t, ok := res.(*a2a.Task); ok && t.Status.State == a2a.TaskStateCompleted {
				verdict = "ALLOW"
			} else {
				verdict = fmt.Sprintf("answered %T", res)
			}
		}
		r.verdict(fmt.Sprintf("  %-27s -> %s", tc.Label, verdict), tc.Label, verdict == want, verdict, want)
		if len(tc.Caller.Chain) > 1 {
			r.say("      the token's act chain before the caller: %s", strings.Join(tc.Caller.Chain, " > "))
		}
		if f != nil {
			for _, e := range f.Denials() {
				r.say("      %s", e.Metadata["reason"])
			}
			r.check(tc.Label+": the refusal", f.Code == a2aadapter.CodeDenied && f.Status == 403,
				fmt.Sprintf("%d in HTTP %d", f.Code, f.Status), fmt.Sprintf("%d in HTTP 403", a2aadapter.CodeDenied))
		}
	}
	for _, key := range s.Unreached {
		r.equal(agentName(key)+": message/send requests received", requests(st, key, "message/send"), 0)
	}
	r.say("")
	r.say("  A refusal is JSON-RPC -32000 PERMISSION_DENIED in HTTP 403; the refused agents never saw a request.")
}

// requests counts the JSON-RPC calls of method the agent behind key received.
func requests(st *Stage, key, method string) int {
	n := 0
	for _, o := range st.agents[key].Requests() {
		if o.Method == method {
			n++
		}
	}
	return n
}

// 3. Streaming

func (s Streaming) run(ctx context.Context, st *Stage, r *recorder) {
	r.say("  message/stream to %s; writ relays each SSE event as it arrives:", agentName(s.Route))
	r.say("")
	c, err := st.client(ctx, s.Route, s.Caller)
	if !r.noError("a client for "+s.Route, err) {
		return
	}
	parts := []a2a.Part{a2a.TextPart{Text: s.Text}}
	if s.Data != nil {
		parts = append(parts, a2a.DataPart{Data: s.Data})
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	var artifact *a2a.Artifact
	var events []string
	final := ""
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if !r.noError("the stream", err) {
			break
		}
		switch e := ev.(type) {
		case *a2a.Task:
			st.streamed = e.ID
			events = append(events, "task "+string(e.Status.State))
			r.say("  task     %s %s", short(string(e.ID)), e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			st.streamed, final = e.TaskID, msgText(e.Status.Message)
			events = append(events, "status "+string(e.Status.State))
			r.say("  status   %-16s final=%v%s", e.Status.State, e.Final, quoted(msgText(e.Status.Message)))
		case *a2a.TaskArtifactUpdateEvent:
			artifact = e.Artifact
			events = append(events, "artifact "+e.Artifact.Name)
			r.say("  artifact %-16s last_chunk=%v", e.Artifact.Name, e.LastChunk)
		case *a2a.Message:
			events = append(events, "message")
			r.say("  message  %s", quoted(msgText(e)))
		}
	}
	r.equal("the stream's events", events, s.WantEvents)
	r.equal("the final status message", final, s.WantFinal)
	if !r.check("the artifact", artifact != nil, "none", "one") {
		return
	}
	var got, lines []string
	for _, p := range artifact.Parts {
		got = append(got, partText(p))
		lines = append(lines, "      "+partText(p))
	}
	r.say("  the artifact's parts:")
	r.verdict(strings.Join(lines, "\n"), "the artifact's parts", slices.Equal(got, s.WantParts), got, s.WantParts)
}

// 4. Input required

func (s InputRequired) run(ctx context.Context, st *Stage, r *recorder) {
	res, f, err := st.send(ctx, s.Route, s.Caller, newMessage(s.First))
	t, ok := res.(*a2a.Task)
	if !r.check("the first send", ok && f == nil && err == nil, answer(res, f, err), "a task") {
		return
	}
	got, want := status(t), string(a2a.TaskStateInputRequired)+quoted(s.WantQuestion)
	r.verdict(fmt.Sprintf("  after first send : %s —%s   (task %s)", t.Status.State, quoted(msgText(t.Status.Message)), short(string(t.ID))),
		"after the first send", got == want, got, want)

	reply := newMessage(s.Reply)
	reply.Message.TaskID, reply.Message.ContextID = t.ID, t.ContextID
	res, f, err = st.send(ctx, s.Route, s.Caller, reply)
	t, ok = res.(*a2a.Task)
	if !r.check("the reply", ok && f == nil && err == nil, answer(res, f, err), "a task") {
		return
	}
	got, want = status(t), string(a2a.TaskStateCompleted)+quoted(s.WantDone)
	r.verdict(fmt.Sprintf("  after reply      : %s —%s   (task %s)", t.Status.State, quoted(msgText(t.Status.Message)), short(string(t.ID))),
		"after the reply", got == want, got, want)
	var roles []string
	for _, m := range t.History {
		roles = append(roles, string(m.Role))
	}
	r.say("  history          : %v", roles)
	r.say("  writ let the reply through because its lifecycle store knows the task is the")
	r.say("  investigator's and is waiting for input.")
}

// 5. Cancellation

func (s Cancellation) run(ctx context.Context, st *Stage, r *recorder) {
	name := agentName(s.Route)
	c, err := st.client(ctx, s.Route, s.Caller)
	if !r.noError("a client for "+s.Route, err) {
		return
	}
	p := newMessage(s.Text)
	p.Config = &a2a.MessageSendConfig{Blocking: new(false)}
	res, f, err := st.send(ctx, s.Route, s.Caller, p)
	t, ok := res.(*a2a.Task)
	if !r.check("a non-blocking send to "+name, ok && f == nil && err == nil, answer(res, f, err), "a task") {
		return
	}
	id := t.ID
	// The agent moves the task to working just after answering: its state hook
	// says when.
	state, ok := st.states.wait(ctx, id, a2a.TaskStateWorking)
	r.verdict(fmt.Sprintf("  sent (non-blocking) to %s: task %s is %s", name, short(string(id)), state),
		"the task before the cancel", ok, state, a2a.TaskStateWorking)

	var cancelled *a2a.Task
	f, err = rpcCall(ctx, func(ctx context.Context) (err error) {
		cancelled, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
		return err
	})
	if !r.check("cancel", f == nil && err == nil && cancelled != nil, answer(cancelled, f, err), "the canceled task") {
		return
	}
	got, want := status(cancelled), string(a2a.TaskStateCanceled)+quoted(s.WantCanceled)
	r.verdict(fmt.Sprintf("  cancel           : %s —%s", cancelled.Status.State, quoted(msgText(cancelled.Status.Message))),
		"after cancel", got == want, got, want)

	f, err = rpcCall(ctx, func(ctx context.Context) (err error) {
		_, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
		return err
	})
	if r.check("cancel again", f != nil, answer(nil, f, err), "a JSON-RPC error") {
		s.Repeat.expect(r, "cancel again", fmt.Sprintf("  cancel again     : %s (%d) %s — %q",
			faultName(f.Code), f.Code, strings.Join(f.Reasons(), ", "), shortIDs(f.Message, id)), f, err)
	}
	cancels := requests(st, s.Route, "tasks/cancel")
	r.verdict(fmt.Sprintf("                     answered by writ from its lifecycle store: the agent saw %d cancel", cancels),
		"cancels the agent saw", cancels == s.AgentCancels, cancels, s.AgentCancels)

	more := newMessage(s.FollowUp)
	more.Message.TaskID, more.Message.ContextID = id, t.ContextID
	_, f, err = st.send(ctx, s.Route, s.Caller, more)
	if r.check("a message to the canceled task", f != nil, answer(nil, f, err), "a JSON-RPC error") {
		s.Terminal.expect(r, "a message to the canceled task", fmt.Sprintf("  message to it    : %s (%d) %s — %q",
			faultName(f.Code), f.Code, strings.Join(f.Reasons(), ", "), shortIDs(f.Message, id)), f, err)
	}
}

// expect checks the fault f (shown by line) and that a2a-go typed err as
// the SDK error.
func (want Fault) expect(r *recorder, name, line string, f *rpcFault, err error) {
	r.verdict(line, name, f.Code == want.Code && slices.Contains(f.Reasons(), want.Reason),
		fmt.Sprintf("%d %v", f.Code, f.Reasons()), fmt.Sprintf("%d with reason %s", want.Code, want.Reason))
	r.check(name+": as a2a-go reads it", errors.Is(err, want.SDK), errText(err), want.SDK)
}

// 6. Push notifications

func (s Push) run(ctx context.Context, st *Stage, r *recorder) {
	r.say("  A push config names a URL the agent will later call: writ checks it before the agent sees it.")
	r.say("")
	for _, tc := range s.Refused {
		p := newMessage(s.Text)
		p.Config = &a2a.MessageSendConfig{PushConfig: &tc.Config}
		_, f, err := st.send(ctx, s.Route, s.Caller, p)
		verdict := "ALLOW"
		switch {
		case f != nil:
			verdict = f.Codes()
		case err != nil:
			verdict = "error: " + err.Error()
		}
		r.verdict(fmt.Sprintf("  %-38s -> %s", tc.Label, verdict), "push "+tc.Label, verdict == tc.Want, verdict, tc.Want)
		if f != nil {
			for _, e := range f.Denials() {
				r.say("      %s", e.Metadata["reason"])
			}
		}
	}

	// An allowed callback: writ keeps the config (the agent never sees it) and
	// delivers every state change itself.
	d := s.Delivered
	r.say("")
	r.say("  %s (token) on a task that asks for input, then completes:", st.receiver.url)
	p := newMessage(d.First)
	p.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: st.receiver.url, Token: d.Token}}
	res, f, err := st.send(ctx, d.Route, s.Caller, p)
	t, ok := res.(*a2a.Task)
	if !r.check("a send with an allowed push config", ok && f == nil && err == nil, answer(res, f, err), "a task") {
		return
	}
	reply := newMessage(d.Reply)
	reply.Message.TaskID, reply.Message.ContextID = t.ID, t.ContextID
	if res, f, err = st.send(ctx, d.Route, s.Caller, reply); !r.check("the reply", f == nil && err == nil, answer(res, f, err), "a task") {
		return
	}
	var states []string
	for _, g := range st.receiver.wait(ctx, len(d.WantStates)) {
		var n struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		_ = json.Unmarshal([]byte(g.body), &n)
		states = append(states, n.Status.State)
		r.verdict(fmt.Sprintf("  delivered        : task %s %-15s token %q", short(n.ID), n.Status.State, g.token),
			"the "+n.Status.State+" delivery", g.token == d.Token && n.ID == string(t.ID),
			fmt.Sprintf("task %s, token %q", n.ID, g.token), fmt.Sprintf("task %s, token %q", t.ID, d.Token))
	}
	r.equal("the states delivered", states, d.WantStates)
	seen := false
	for _, o := range st.agents[d.Route].Requests() {
		seen = seen || strings.Contains(o.Body, st.receiver.url)
	}
	r.verdict("  the agent never saw the callback: writ stripped it, kept it, and delivered through its SSRF guard.",
		"the callback reached the agent", !seen, seen, false)
}

// 7. Protocol-agnostic core

func (s Core) run(ctx context.Context, st *Stage, r *recorder) {
	if !r.check("the streamed task", st.streamed != "", "none", "the finished task of the streaming step") {
		return
	}
	c, err := st.client(ctx, s.Route, s.Caller)
	if !r.noError("a client for "+s.Route, err) {
		return
	}
	t, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: st.streamed})
	if !r.noError("tasks/get of the streamed task", err) {
		return
	}
	raw, _ := json.Marshal(t)
	internal, err := a2aadapter.ParseTask(raw, a2aadapter.V03)
	if !r.noError("A2A -> internal", err) {
		return
	}
	structured, _ := json.Marshal(internal.Structured)
	r.say("  tasks/get through writ, then adapters/a2a.ParseTask:")
	r.verdict(fmt.Sprintf("  internal state   : %s", internal.State), "the internal state", internal.State == s.WantState,
		internal.State, s.WantState)
	r.say("  input            : %q", internal.InputText)
	r.say("  output           : %q", internal.OutputText)
	r.say("  structured       : %s", structured)

	run, err := acp.RenderRun(internal)
	if !r.noError("internal -> ACP", err) {
		return
	}
	var env struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Output []struct {
			Parts []json.RawMessage `json:"parts"`
		} `json:"output"`
	}
	_ = json.Unmarshal(run, &env)
	parts := 0
	for _, m := range env.Output {
		parts += len(m.Parts)
	}
	got, want := fmt.Sprintf("status=%s parts=%d", env.Status, parts), fmt.Sprintf("status=%s parts=%d", s.WantRun, s.WantParts)
	r.verdict(fmt.Sprintf("  ACP envelope     : run_id=%s %s", short(env.RunID), got), "the ACP run", got == want, got, want)
	back, err := acp.ParseRun(run)
	acpOK := err == nil && reflect.DeepEqual(back, internal)
	r.verdict(fmt.Sprintf("  round-trips      : %v   (internal -> ACP run -> internal)", acpOK),
		"internal -> ACP -> internal", acpOK, roundTrip(err), "the same task")

	v10, err := a2aadapter.RenderTask(internal, a2aadapter.V10)
	var again *task.Task
	if err == nil {
		again, err = a2aadapter.ParseTask(v10, a2aadapter.V10)
	}
	a2aOK := err == nil && reflect.DeepEqual(again, internal)
	r.verdict(fmt.Sprintf("  as A2A 1.0       : round-trips %v   (internal -> A2A 1.0 task -> internal)", a2aOK),
		"internal -> A2A 1.0 -> internal", a2aOK, roundTrip(err), "the same task")
	r.say("  -> the kernel never learns a protocol's vocabulary; adapters translate.")
}

// roundTrip says what came back from a round trip that differed (or failed).
func roundTrip(err error) string {
	if err != nil {
		return err.Error()
	}
	return "a different task"
}

// 8. The published card

func (s Card) run(ctx context.Context, st *Stage, r *recorder) {
	path := "/" + s.Route + "/.well-known/agent-card.json"
	status, body, err := st.get(ctx, path, &s.Caller)
	var card map[string]any
	if !r.check("GET "+path+" as "+s.Caller.Agent, err == nil && status == 200 && json.Unmarshal(body, &card) == nil,
		fmt.Sprintf("HTTP %d, %s", status, errText(err)), "HTTP 200 with a card") {
		return
	}
	r.say("  GET %s as %s (HTTP %d):", path, s.Caller.Agent, status)
	for _, k := range s.Show {
		v, _ := json.Marshal(card[k])
		r.say("  %-18s %s", k, v)
	}
	var schemes []string
	if m, ok := card["securitySchemes"].(map[string]any); ok {
		for name, s := range m {
			sm, _ := s.(map[string]any)
			schemes = append(schemes, fmt.Sprintf("%s (%v %v %v)", name, sm["type"], sm["scheme"], sm["bearerFormat"]))
		}
	}
	slices.Sort(schemes)
	r.verdict(fmt.Sprintf("  %-18s %s   <- what writ verifies, not the agent's own", "securitySchemes", strings.Join(schemes, ", ")),
		"the card's security schemes", slices.Equal(schemes, s.WantSchemes), schemes, s.WantSchemes)
	var skills []string
	if list, ok := card["skills"].([]any); ok {
		for _, s := range list {
			if sm, ok := s.(map[string]any); ok {
				skills = append(skills, fmt.Sprint(sm["id"]))
			}
		}
	}
	r.say("  %-18s %v", "skills", skills)
	r.equal("the card's name", card["name"], s.WantName)
	r.equal("the card's url", card["url"], st.url+"/"+s.Route)
	var leaked []string
	for _, k := range s.PlatformKeys {
		if _, ok := card[k]; ok {
			leaked = append(leaked, k)
		}
	}
	for _, v := range s.PlatformValues {
		if strings.Contains(string(body), v) {
			leaked = append(leaked, v)
		}
	}
	if r.check("platform metadata on the card", len(leaked) == 0, leaked, "none") {
		r.say("  owner, tenants and max_data_classification are PLATFORM metadata in writ's config:")
		r.say("  absent from the published card.")
	}

	status, _, err = st.get(ctx, path, nil)
	r.say("")
	r.verdict(fmt.Sprintf("  the same GET without a token: HTTP %d — to a caller who may not see the agent, it does not exist.", status),
		"the card without a token", err == nil && status == s.WantAnonymous,
		fmt.Sprintf("HTTP %d (%s)", status, errText(err)), fmt.Sprintf("HTTP %d", s.WantAnonymous))
}
