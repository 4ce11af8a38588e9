package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/writ-authz/writ/adapters"
	a2aadapter "github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/adapters/acp"
	"github.com/writ-authz/writ/task"
)

// The scenario's callers beyond the two in demo.go: the investigator again, with
// longer RFC 8693 act chains.
var (
	deepCaller = demoCaller{agent: "payments-investigator", user: "u-42", tenant: "wholesale", class: "restricted",
		chain: []string{"orchestrator", "case-router", "aml-triage", "alert-enricher"}}
	cyclicCaller = demoCaller{agent: "payments-investigator", user: "u-42", tenant: "wholesale", class: "restricted",
		chain: []string{"orchestrator", "sanctions-screening-agent"}}
)

const screenRequest = "Screen the beneficiary of PMT-771"

// send is one message/send through writ with a real a2a-go client.
func (d *demo) send(ctx context.Context, route, tok string, p *a2a.MessageSendParams) (a2a.SendMessageResult, *rpcFault, error) {
	c, err := d.client(ctx, route, tok)
	if err != nil {
		return nil, nil, err
	}
	var res a2a.SendMessageResult
	f, err := rpcCall(ctx, func(ctx context.Context) error {
		res, err = c.SendMessage(ctx, p)
		return err
	})
	return res, f, err
}

func newMessage(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

// ---------------------------------------------------------------------------------
// 1. Discovery
// ---------------------------------------------------------------------------------

func (d *demo) stepDiscovery(ctx context.Context) {
	d.heading("1. DISCOVERY — WHO CAN DO THIS?")
	fmt.Fprintf(d.out, "  GET %s: writ asks the policy (operation \"discover\") about every agent\n", adapters.DirectoryPath)
	fmt.Fprintf(d.out, "  and lists only those this caller may see; ?tags= ranks and filters by skill tags.\n")
	sanctions := []string{"sanctions-clarifier", "sanctions-screening-agent", "sanctions-slow"}
	marketingWhy := "handles up to 'internal' and accepts only apikey"
	views := []struct {
		who, tok, tags string
		want           []string
		why            map[string]string
	}{
		{"payments-investigator (wholesale, restricted)", d.token(investigator), "sanctions", sanctions,
			map[string]string{"kyc-refresh-agent": "serves tenant 'retail' only",
				"marketing-copy-agent": marketingWhy}},
		{"kyc-ops-bot (retail, confidential)", d.token(retailCaller), "sanctions", sanctions,
			map[string]string{"kyc-refresh-agent": "has no skill tagged 'sanctions'",
				"marketing-copy-agent": marketingWhy}},
		{"payments-investigator, no tag filter", d.token(investigator), "", sanctions, nil},
		{"kyc-ops-bot, no tag filter", d.token(retailCaller), "", append([]string{"kyc-refresh-agent"}, sanctions...), nil},
	}
	for i, v := range views {
		path := adapters.DirectoryPath
		if v.tags != "" {
			path += "?tags=" + v.tags
		}
		status, body, err := d.get(ctx, path, v.tok)
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
		if !d.check(err == nil && status == 200 && json.Unmarshal(body, &dir) == nil,
			"directory as %s: HTTP %d, %s: %.200s", v.who, status, errText(err), body) {
			continue
		}
		var names []string
		for _, a := range dir.Agents {
			names = append(names, a.Name)
		}
		label := v.who
		if v.tags != "" {
			label += ", tags=" + v.tags
		}
		fmt.Fprintf(d.out, "\n  %s:\n", label)
		if i == 0 {
			for _, a := range dir.Agents {
				var skills []string
				for _, s := range a.Skills {
					skills = append(skills, s.ID)
				}
				fmt.Fprintf(d.out, "    %-27s v%-6s skills=%v streaming=%v\n", a.Name, a.Version, skills, a.Capabilities.Streaming)
			}
		} else {
			fmt.Fprintf(d.out, "    %s\n", strings.Join(names, ", "))
		}
		d.check(slices.Equal(names, v.want), "directory as %s: got %v, want %v", label, names, v.want)
		if v.why != nil {
			var hidden []string
			for _, a := range demoAgents {
				if why, ok := v.why[a.name]; ok && !slices.Contains(names, a.name) {
					hidden = append(hidden, a.name+" ("+why+")")
				}
			}
			fmt.Fprintf(d.out, "    hidden: %s\n", strings.Join(hidden, "; "))
		}
	}
}

// ---------------------------------------------------------------------------------
// 2. Admission
// ---------------------------------------------------------------------------------

func (d *demo) stepAdmission(ctx context.Context) {
	d.heading("2. DELEGATION ADMISSION — WHAT A2A DOES NOT SPECIFY")
	fmt.Fprintf(d.out, "  payments-investigator (user u-42, tenant wholesale, data restricted, acting for orchestrator)\n")
	fmt.Fprintf(d.out, "  sends message/send through writ; a refusal lists the policy's codes in error.data:\n\n")
	cases := []struct {
		label, route string
		caller       demoCaller
		want         []string
	}{
		{"sanctions-screening-agent", "sanctions", investigator, nil},
		{"kyc-refresh-agent", "kyc", investigator, []string{"CLASSIFICATION_EXCEEDED", "TENANT_NOT_PERMITTED"}},
		{"marketing-copy-agent", "marketing", investigator, []string{"CLASSIFICATION_EXCEEDED", "NO_ACCEPTABLE_AUTH"}},
		{"chain depth 4", "sanctions", deepCaller, []string{"DEPTH_EXCEEDED"}},
		{"cycle", "sanctions", cyclicCaller, []string{"CYCLE_DETECTED"}},
	}
	for _, c := range cases {
		res, f, err := d.send(ctx, c.route, d.token(c.caller), newMessage(screenRequest))
		verdict, want := "", "ALLOW"
		if c.want != nil {
			want = strings.Join(c.want, ", ")
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
		fmt.Fprintf(d.out, "  %-27s -> %s\n", c.label, verdict)
		if c.caller.chain != nil && len(c.caller.chain) > 1 {
			fmt.Fprintf(d.out, "      the token's act chain before the caller: %s\n", strings.Join(c.caller.chain, " > "))
		}
		if f != nil {
			for _, e := range f.Denials() {
				fmt.Fprintf(d.out, "      %s\n", e.Metadata["reason"])
			}
			d.check(f.Code == -32000 && f.Status == 403, "%s: a denial must be -32000 in HTTP 403, got %d in %d", c.label, f.Code, f.Status)
		}
		d.check(verdict == want, "%s: got %s, want %s", c.label, verdict, want)
	}
	for _, key := range []string{"kyc", "marketing"} {
		n := 0
		for _, r := range d.agents[key].Requests() {
			if r.Method == "message/send" {
				n++
			}
		}
		d.check(n == 0, "%s received %d refused message(s)", key, n)
	}
	fmt.Fprintf(d.out, "\n  A refusal is JSON-RPC -32000 PERMISSION_DENIED in HTTP 403; the refused agents never saw a request.\n")
}

// ---------------------------------------------------------------------------------
// 3. Streaming
// ---------------------------------------------------------------------------------

func (d *demo) stepStreaming(ctx context.Context) {
	d.heading("3. A STREAMED DELEGATION")
	fmt.Fprintf(d.out, "  message/stream to sanctions-screening-agent; writ relays each SSE event as it arrives:\n\n")
	c, err := d.client(ctx, "sanctions", d.token(investigator))
	if !d.check(err == nil, "client: %s", errText(err)) {
		return
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: screenRequest},
		a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})
	var artifact *a2a.Artifact
	var last a2a.TaskState
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: msg}) {
		if err != nil {
			d.failf("stream: %v", err)
			break
		}
		switch e := ev.(type) {
		case *a2a.Task:
			d.streamedTask, last = e.ID, e.Status.State
			fmt.Fprintf(d.out, "  task     %s %s\n", short(string(e.ID)), e.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			d.streamedTask, last = e.TaskID, e.Status.State
			fmt.Fprintf(d.out, "  status   %-16s final=%v%s\n", e.Status.State, e.Final, quoted(msgText(e.Status.Message)))
		case *a2a.TaskArtifactUpdateEvent:
			artifact = e.Artifact
			fmt.Fprintf(d.out, "  artifact %-16s last_chunk=%v\n", e.Artifact.Name, e.LastChunk)
		case *a2a.Message:
			fmt.Fprintf(d.out, "  message  %s\n", quoted(msgText(e)))
		}
	}
	d.check(last == a2a.TaskStateCompleted, "the stream ended in %q, want completed", last)
	if !d.check(artifact != nil && artifact.Name == "sanctions-screening", "no sanctions-screening artifact arrived") {
		return
	}
	fmt.Fprintf(d.out, "  the artifact's parts:\n")
	for _, p := range artifact.Parts {
		fmt.Fprintf(d.out, "      %s\n", partText(p))
	}
}

// ---------------------------------------------------------------------------------
// 4. Input required
// ---------------------------------------------------------------------------------

func (d *demo) stepInputRequired(ctx context.Context) {
	d.heading("4. INPUT-REQUIRED: A TASK THAT OUTLIVES A REQUEST")
	tok := d.token(investigator)
	res, f, err := d.send(ctx, "clarifier", tok, newMessage("Screen this entity"))
	t, ok := res.(*a2a.Task)
	if !d.check(ok && f == nil && err == nil, "send to the clarifier: %s", errText(err)) {
		return
	}
	fmt.Fprintf(d.out, "  after first send : %s —%s   (task %s)\n", t.Status.State, quoted(msgText(t.Status.Message)), short(string(t.ID)))
	d.check(t.Status.State == a2a.TaskStateInputRequired, "the clarifier's task is %s, want input-required", t.Status.State)

	reply := newMessage("UAE and UN lists")
	reply.Message.TaskID, reply.Message.ContextID = t.ID, t.ContextID
	res, f, err = d.send(ctx, "clarifier", tok, reply)
	t, ok = res.(*a2a.Task)
	if !d.check(ok && f == nil && err == nil, "reply to the clarifier: %s", errText(err)) {
		return
	}
	fmt.Fprintf(d.out, "  after reply      : %s —%s   (task %s)\n", t.Status.State, quoted(msgText(t.Status.Message)), short(string(t.ID)))
	d.check(t.Status.State == a2a.TaskStateCompleted, "after the reply the task is %s, want completed", t.Status.State)
	var roles []string
	for _, m := range t.History {
		roles = append(roles, string(m.Role))
	}
	fmt.Fprintf(d.out, "  history          : %v\n", roles)
	fmt.Fprintf(d.out, "  writ let the reply through because its lifecycle store knows the task is the\n")
	fmt.Fprintf(d.out, "  investigator's and is waiting for input.\n")
}

// ---------------------------------------------------------------------------------
// 5. Cancellation
// ---------------------------------------------------------------------------------

func (d *demo) stepCancel(ctx context.Context) {
	d.heading("5. CANCELLATION AND TERMINAL STATES")
	tok := d.token(investigator)
	c, err := d.client(ctx, "slow", tok)
	if !d.check(err == nil, "client: %s", errText(err)) {
		return
	}
	p := newMessage("Screen something slow")
	p.Config = &a2a.MessageSendConfig{Blocking: new(false)}
	res, f, err := d.send(ctx, "slow", tok, p)
	t, ok := res.(*a2a.Task)
	if !d.check(ok && f == nil && err == nil, "non-blocking send to sanctions-slow: %s", errText(err)) {
		return
	}
	id := t.ID
	// The agent moves the task to working just after answering; wait for it.
	state := t.Status.State
	for deadline := time.Now().Add(5 * time.Second); state != a2a.TaskStateWorking && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id}); err == nil {
			state = got.Status.State
		}
	}
	fmt.Fprintf(d.out, "  sent (non-blocking) to sanctions-slow: task %s is %s\n", short(string(id)), state)
	d.check(state == a2a.TaskStateWorking, "the slow task is %s, want working", state)

	var cancelled *a2a.Task
	f, err = rpcCall(ctx, func(ctx context.Context) (err error) {
		cancelled, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
		return err
	})
	if !d.check(f == nil && err == nil && cancelled != nil, "cancel: %s", errText(err)) {
		return
	}
	fmt.Fprintf(d.out, "  cancel           : %s —%s\n", cancelled.Status.State, quoted(msgText(cancelled.Status.Message)))
	d.check(cancelled.Status.State == a2a.TaskStateCanceled, "after cancel the task is %s, want canceled", cancelled.Status.State)

	f, err = rpcCall(ctx, func(ctx context.Context) (err error) {
		_, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: id})
		return err
	})
	cancels := 0
	for _, r := range d.agents["slow"].Requests() {
		if r.Method == "tasks/cancel" {
			cancels++
		}
	}
	if d.check(f != nil, "cancel again: no JSON-RPC error (%s)", errText(err)) {
		fmt.Fprintf(d.out, "  cancel again     : TaskNotCancelable (%d) %s — %q\n", f.Code, f.Reason(), shortIDs(f.Message, id))
		fmt.Fprintf(d.out, "                     answered by writ from its lifecycle store: the agent saw %d cancel\n", cancels)
		d.check(f.Code == a2aadapter.CodeTaskNotCancelable && f.Reason() == "TASK_NOT_CANCELABLE",
			"cancel again: got %d %s, want -32002 TASK_NOT_CANCELABLE", f.Code, f.Reason())
		d.check(errors.Is(err, a2a.ErrTaskNotCancelable), "a2a-go did not type the answer as ErrTaskNotCancelable: %s", errText(err))
	}
	d.check(cancels == 1, "the agent saw %d cancels, want 1 (writ answers the second itself)", cancels)

	more := newMessage("One more thing")
	more.Message.TaskID, more.Message.ContextID = id, t.ContextID
	_, f, err = d.send(ctx, "slow", tok, more)
	if d.check(f != nil, "message to the canceled task: no JSON-RPC error (%s)", errText(err)) {
		fmt.Fprintf(d.out, "  message to it    : UnsupportedOperation (%d) %s — %q\n", f.Code, strings.Join(f.Reasons(), ", "), shortIDs(f.Message, id))
		d.check(f.Code == a2aadapter.CodeUnsupportedOperation && slices.Contains(f.Reasons(), "TASK_TERMINAL"),
			"message to the canceled task: got %d %v, want -32004 with reason TASK_TERMINAL", f.Code, f.Reasons())
		d.check(errors.Is(err, a2a.ErrUnsupportedOperation), "a2a-go did not type the answer as ErrUnsupportedOperation: %s", errText(err))
	}
}

// ---------------------------------------------------------------------------------
// 6. Push notifications
// ---------------------------------------------------------------------------------

func (d *demo) stepPush(ctx context.Context) {
	d.heading("6. PUSH NOTIFICATIONS — AND THE SSRF THEY INVITE")
	fmt.Fprintf(d.out, "  A push config names a URL the agent will later call: writ checks it before the agent sees it.\n\n")
	cases := []struct {
		label string
		push  a2a.PushConfig
		want  string
	}{
		{"https://evil.example/hook (token)", a2a.PushConfig{URL: "https://evil.example/hook", Token: "s3cret"}, "CALLBACK_NOT_ALLOWED"},
		{"https://agents.bank.ae/cb (no token)", a2a.PushConfig{URL: "https://agents.bank.ae/cb"}, "CALLBACK_UNAUTHENTICATED"},
	}
	for _, c := range cases {
		p := newMessage("Screen slowly")
		p.Config = &a2a.MessageSendConfig{PushConfig: &c.push}
		_, f, err := d.send(ctx, "sanctions", d.token(investigator), p)
		verdict := "ALLOW"
		switch {
		case f != nil:
			verdict = f.Codes()
		case err != nil:
			verdict = "error: " + err.Error()
		}
		fmt.Fprintf(d.out, "  %-38s -> %s\n", c.label, verdict)
		if f != nil {
			for _, e := range f.Denials() {
				fmt.Fprintf(d.out, "      %s\n", e.Metadata["reason"])
			}
		}
		d.check(verdict == c.want, "push %s: got %s, want %s", c.label, verdict, c.want)
	}

	// An allowed callback: writ keeps the config (the agent never sees it) and
	// delivers every state change itself.
	fmt.Fprintf(d.out, "\n  %s (token) on a task that asks for input, then completes:\n", d.rcvURL)
	p := newMessage("Screen this entity")
	p.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: d.rcvURL, Token: "demo-token"}}
	tok := d.token(investigator)
	res, f, err := d.send(ctx, "clarifier", tok, p)
	t, ok := res.(*a2a.Task)
	if !d.check(ok && f == nil && err == nil, "send with an allowed push config: %s", errText(err)) {
		return
	}
	reply := newMessage("UAE and UN lists")
	reply.Message.TaskID, reply.Message.ContextID = t.ID, t.ContextID
	if _, f, err = d.send(ctx, "clarifier", tok, reply); !d.check(f == nil && err == nil, "reply: %s", errText(err)) {
		return
	}
	got := d.deliveries(2)
	var states []string
	for _, g := range got {
		var n struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		_ = json.Unmarshal([]byte(g.body), &n)
		fmt.Fprintf(d.out, "  delivered        : task %s %-15s token %q\n", short(n.ID), n.Status.State, g.token)
		states = append(states, n.Status.State)
		d.check(g.token == "demo-token" && n.ID == string(t.ID), "delivery %s: token %q, task %s", n.Status.State, g.token, n.ID)
	}
	d.check(slices.Equal(states, []string{"input-required", "completed"}), "deliveries %v, want [input-required completed]", states)
	seen := false
	for _, o := range d.agents["clarifier"].Requests() {
		seen = seen || strings.Contains(o.Body, d.rcvURL)
	}
	d.check(!seen, "the agent received the push config")
	fmt.Fprintf(d.out, "  the agent never saw the callback: writ stripped it, kept it, and delivered through its SSRF guard.\n")
}

// ---------------------------------------------------------------------------------
// 7. Protocol-agnostic core
// ---------------------------------------------------------------------------------

func (d *demo) stepCore(ctx context.Context) {
	d.heading("7. PROTOCOL-AGNOSTIC CORE: A2A -> INTERNAL -> ACP -> INTERNAL")
	if !d.check(d.streamedTask != "", "no finished task from step 3") {
		return
	}
	c, err := d.client(ctx, "sanctions", d.token(investigator))
	if !d.check(err == nil, "client: %s", errText(err)) {
		return
	}
	t, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: d.streamedTask})
	if !d.check(err == nil, "tasks/get of step 3's task: %s", errText(err)) {
		return
	}
	raw, _ := json.Marshal(t)
	internal, err := a2aadapter.ParseTask(raw, a2aadapter.V03)
	if !d.check(err == nil, "A2A -> internal: %s", errText(err)) {
		return
	}
	structured, _ := json.Marshal(internal.Structured)
	fmt.Fprintf(d.out, "  tasks/get through writ, then adapters/a2a.ParseTask:\n")
	fmt.Fprintf(d.out, "  internal state   : %s\n", internal.State)
	fmt.Fprintf(d.out, "  input            : %q\n", internal.InputText)
	fmt.Fprintf(d.out, "  output           : %q\n", internal.OutputText)
	fmt.Fprintf(d.out, "  structured       : %s\n", structured)
	d.check(internal.State == "succeeded", "internal state %s, want succeeded", internal.State)

	run, err := acp.RenderRun(internal)
	if !d.check(err == nil, "internal -> ACP: %s", errText(err)) {
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
	fmt.Fprintf(d.out, "  ACP envelope     : run_id=%s status=%s parts=%d\n", short(env.RunID), env.Status, parts)
	back, err := acp.ParseRun(run)
	acpOK := err == nil && reflect.DeepEqual(back, internal)
	fmt.Fprintf(d.out, "  round-trips      : %v   (internal -> ACP run -> internal)\n", acpOK)
	d.check(acpOK, "internal -> ACP -> internal differs (%s)", errText(err))

	v10, err := a2aadapter.RenderTask(internal, a2aadapter.V10)
	var again *task.Task
	if err == nil {
		again, err = a2aadapter.ParseTask(v10, a2aadapter.V10)
	}
	a2aOK := err == nil && reflect.DeepEqual(again, internal)
	fmt.Fprintf(d.out, "  as A2A 1.0       : round-trips %v   (internal -> A2A 1.0 task -> internal)\n", a2aOK)
	d.check(a2aOK, "internal -> A2A 1.0 -> internal differs (%s)", errText(err))
	fmt.Fprintf(d.out, "  -> the kernel never learns a protocol's vocabulary; adapters translate.\n")
}

// ---------------------------------------------------------------------------------
// 8. The published card
// ---------------------------------------------------------------------------------

func (d *demo) stepCard(ctx context.Context) {
	d.heading("8. THE AGENT CARD ON THE WIRE")
	path := "/sanctions/.well-known/agent-card.json"
	status, body, err := d.get(ctx, path, d.token(investigator))
	var card map[string]any
	if !d.check(err == nil && status == 200 && json.Unmarshal(body, &card) == nil,
		"GET %s as the investigator: HTTP %d, %s", path, status, errText(err)) {
		return
	}
	fmt.Fprintf(d.out, "  GET %s as payments-investigator (HTTP %d):\n", path, status)
	for _, k := range []string{"protocolVersion", "name", "url", "version", "capabilities"} {
		v, _ := json.Marshal(card[k])
		fmt.Fprintf(d.out, "  %-18s %s\n", k, v)
	}
	var schemes []string
	if m, ok := card["securitySchemes"].(map[string]any); ok {
		for name, s := range m {
			sm, _ := s.(map[string]any)
			schemes = append(schemes, fmt.Sprintf("%s (%v %v %v)", name, sm["type"], sm["scheme"], sm["bearerFormat"]))
		}
	}
	slices.Sort(schemes)
	fmt.Fprintf(d.out, "  %-18s %s   <- what writ verifies, not the agent's own\n", "securitySchemes", strings.Join(schemes, ", "))
	var skills []string
	if list, ok := card["skills"].([]any); ok {
		for _, s := range list {
			if sm, ok := s.(map[string]any); ok {
				skills = append(skills, fmt.Sprint(sm["id"]))
			}
		}
	}
	fmt.Fprintf(d.out, "  %-18s %v\n", "skills", skills)
	d.check(card["name"] == "sanctions-screening-agent", "card name %v", card["name"])
	d.check(card["url"] == d.url+"/sanctions", "card url %v, want writ's %s/sanctions", card["url"], d.url)
	var leaked []string
	for _, k := range []string{"owner", "tenants", "max_data_classification", "maxDataClassification"} {
		if _, ok := card[k]; ok {
			leaked = append(leaked, k)
		}
	}
	for _, v := range []string{"group-compliance", "wholesale"} {
		if strings.Contains(string(body), v) {
			leaked = append(leaked, v)
		}
	}
	if d.check(len(leaked) == 0, "the card leaks platform metadata: %v", leaked) {
		fmt.Fprintf(d.out, "  owner, tenants and max_data_classification are PLATFORM metadata in writ's config:\n")
		fmt.Fprintf(d.out, "  absent from the published card.\n")
	}

	status, _, err = d.get(ctx, path, "")
	fmt.Fprintf(d.out, "\n  the same GET without a token: HTTP %d — to a caller who may not see the agent, it does not exist.\n", status)
	d.check(err == nil && status == 404, "anonymous card: HTTP %d (%s), want 404", status, errText(err))
}

// ---------------------------------------------------------------------------------
// Printing helpers
// ---------------------------------------------------------------------------------

// msgText joins the text parts of m.
func msgText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var bits []string
	for _, p := range m.Parts {
		switch t := p.(type) {
		case a2a.TextPart:
			bits = append(bits, t.Text)
		case *a2a.TextPart:
			bits = append(bits, t.Text)
		}
	}
	return strings.Join(bits, " ")
}

// partText shows one part as "kind: content".
func partText(p a2a.Part) string {
	switch t := p.(type) {
	case a2a.TextPart:
		return "text: " + t.Text
	case *a2a.TextPart:
		return "text: " + t.Text
	case a2a.DataPart:
		raw, _ := json.Marshal(t.Data)
		return "data: " + string(raw)
	case *a2a.DataPart:
		raw, _ := json.Marshal(t.Data)
		return "data: " + string(raw)
	}
	return fmt.Sprintf("%T", p)
}

func quoted(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" %q", s)
}

// short abbreviates a task id for the screen: its tail (the head of a UUIDv7 is a
// timestamp, the same for every task of the demo).
func short(id string) string {
	if len(id) > 12 {
		return "…" + id[len(id)-8:]
	}
	return id
}

// shortIDs abbreviates id wherever it appears in s.
func shortIDs(s string, id a2a.TaskID) string {
	return strings.ReplaceAll(s, string(id), short(string(id)))
}
