package authzen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
)

// The delegation profile (docs/authzen-profile.md): "may this agent do this
// to that agent (or task)?", asked in AuthZEN's terms and decided by the
// admission core exactly as the sidecar decides the request itself.
//
//	subject   {type: "agent", id: <the calling agent>, properties: {token}}
//	          the caller: the token it presented, verified by writ's
//	          identity sources as the sidecar verifies it (its agent must be
//	          subject.id); without one, anonymous, unless the enforcement
//	          point is trusted to state the caller (trust_subject_properties)
//	action    {name: <operation>}: send, stream, get, list, cancel, ...
//	resource  {type: "agent", id: <agent>} or
//	          {type: "task", id: <task id>, properties: {agent: <agent>}}
//	context   data_classification, context_id, tenant, callback,
//	          reference_task_ids, push_config_id, parts, file_uris,
//	          protocol, request
//
// The answer's context carries the decision id and, when denied, the
// reason (the fault's kind), the status the sidecar answers with, its
// neutral message and every denial code with its neutral reason: what a
// refused caller learns from any door, never the policy's own reasons.

// The profile's entity types.
const (
	typeAgent = "agent"
	typeTask  = "task"
)

// protocolName is the input's protocol.name for a question asked through
// this door, unless the context names the protocol of the request it is
// about.
const protocolName = "authzen"

// delegation is the profile's decision point.
type delegation struct {
	core  *proxy.Core
	ident *identity.Resolver
	// agents are the protected agents' names, sorted: a resource search's
	// candidates.
	agents []string
	trust  bool
	log    *slog.Logger
}

func newDelegation(core *proxy.Core, ident *identity.Resolver, cfg *config.Config, log *slog.Logger) *delegation {
	d := &delegation{core: core, ident: ident, trust: cfg.AuthZEN.Delegation.TrustSubjectProperties, log: log}
	for _, a := range cfg.Agents {
		d.agents = append(d.agents, a.Name)
	}
	slices.Sort(d.agents)
	return d
}

// begin: the core decides every question on the engine's serving policy,
// whose residual per agent and operation is prepared once; what the
// evaluations of one request share is their subjects' callers (a batch's
// default subject is verified once).
func (d *delegation) begin() (evaluator, error) {
	return &delegationEval{d: d, callers: map[string]identity.Caller{}}, nil
}

func (d *delegation) searches(searchKind) bool { return true }

// delegationEval decides the evaluations of one request.
type delegationEval struct {
	d *delegation
	// callers are the callers of the tokens seen in this request, verified
	// once each (a request is decided within its tokens' lifetime).
	callers map[string]identity.Caller
}

func (e *delegationEval) evaluate(ctx context.Context, q *query) result {
	qn, err := e.question(ctx, q)
	if err != nil {
		r := denied(http.StatusBadRequest, err.Error())
		r.invalid = err
		return r
	}
	return verdictResult(e.d.core.Decide(ctx, qn))
}

// question maps an evaluation onto the core's Question; an error is why the
// profile cannot ask it (a 400 for that evaluation).
func (e *delegationEval) question(ctx context.Context, q *query) (proxy.Question, error) {
	var qn proxy.Question
	if t := str(q.Subject, "type"); t != typeAgent {
		return qn, fmt.Errorf("subject.type is %q; the delegation profile asks about agents (%q)", t, typeAgent)
	}
	op := task.Operation(str(q.Action, "name"))
	if !op.Known() {
		return qn, fmt.Errorf("action.name %q is not an operation of writ/v1 (%s)", op, strings.Join(operationNames(), ", "))
	}
	caller, err := e.caller(ctx, q.Subject)
	if err != nil {
		return qn, err
	}
	qn = proxy.Question{Mode: events.ModeAuthZEN, Caller: caller,
		Request: task.Request{Operation: op, Protocol: task.Protocol{Name: protocolName, Version: "1.0", Method: string(op)}}}
	id := str(q.Resource, "id")
	switch str(q.Resource, "type") {
	case typeAgent:
		if op.FollowUp() {
			return qn, fmt.Errorf("%s acts on a task: ask about a resource of type %q", op, typeTask)
		}
		qn.Agent = id
	case typeTask:
		agent, _ := properties(q.Resource)["agent"].(string)
		if agent == "" {
			return qn, fmt.Errorf("a resource of type %q names its agent: resource.properties.agent", typeTask)
		}
		if !op.FollowUp() && op != task.OpSend && op != task.OpStream {
			return qn, fmt.Errorf("%s does not act on a task: ask about a resource of type %q", op, typeAgent)
		}
		qn.Agent, qn.Request.TaskID = agent, id
	default:
		return qn, fmt.Errorf("resource.type is %q; the delegation profile knows %q and %q", str(q.Resource, "type"), typeAgent, typeTask)
	}
	if err := fromContext(&qn, q.Context); err != nil {
		return qn, err
	}
	return qn, nil
}

// caller is who the subject is. A token is verified as the sidecar verifies
// one (a refused token makes the subject anonymous, as it makes a request's
// caller), and must speak for subject.id.
func (e *delegationEval) caller(ctx context.Context, subject map[string]any) (identity.Caller, error) {
	d := e.d
	props := properties(subject)
	if raw, ok := props["token"]; ok && raw != nil {
		tok, ok := raw.(string)
		if !ok {
			return identity.Caller{}, errors.New("subject.properties.token must be a string")
		}
		c, seen := e.callers[tok]
		if !seen {
			var err error
			c, err = d.ident.Identify(ctx, identity.Credentials{Header: http.Header{"Authorization": {"Bearer " + tok}}})
			if err != nil {
				d.log.Info("authzen: the subject's token was refused; the subject is anonymous", "error", err)
				c = identity.Anonymous()
			}
			e.callers[tok] = c
		}
		if c.Authenticated && c.AgentID != str(subject, "id") {
			return identity.Caller{}, errors.New("subject.id is not the agent the subject's token speaks for")
		}
		return c, nil
	}
	if !d.trust {
		return identity.Anonymous(), nil
	}
	return asserted(subject)
}

// asserted is the caller the enforcement point states in the subject's
// properties (authzen.delegation.trust_subject_properties).
func asserted(subject map[string]any) (identity.Caller, error) {
	p := properties(subject)
	c := identity.Caller{Authenticated: true, Method: identity.MethodJWT, AgentID: str(subject, "id")}
	if err := stringsInto(p, "subject.properties.", []field{{"user_id", &c.UserID}, {"tenant", &c.Tenant},
		{"issuer", &c.Issuer}, {"classification", &c.Classification}, {"chain_id", &c.ChainID}, {"method", &c.Method}}); err != nil {
		return identity.Caller{}, err
	}
	var err error
	if c.Method != identity.MethodJWT && c.Method != identity.MethodMTLS {
		return identity.Caller{}, fmt.Errorf("subject.properties.method must be %s or %s", identity.MethodJWT, identity.MethodMTLS)
	}
	if c.Classification != "" && task.Level(c.Classification).Rank() < 0 {
		return identity.Caller{}, fmt.Errorf("subject.properties.classification %q is not a classification level", c.Classification)
	}
	if s, ok := p["scopes"].(string); ok {
		c.Scopes = strings.Fields(s)
	} else if c.Scopes, err = stringList(p, "scopes", "subject.properties."); err != nil {
		return identity.Caller{}, err
	}
	if c.Chain, err = stringList(p, "delegation_chain", "subject.properties."); err != nil {
		return identity.Caller{}, err
	}
	return c, nil
}

// fromContext reads the profile's context members into the question.
func fromContext(qn *proxy.Question, ctx map[string]any) error {
	req := &qn.Request
	op := req.Operation
	var level, tenant string
	if err := stringsInto(ctx, "context.", []field{{"data_classification", &level}, {"context_id", &req.ContextID},
		{"tenant", &tenant}, {"push_config_id", &req.PushConfigID}}); err != nil {
		return err
	}
	if level != "" {
		if task.Level(level).Rank() < 0 {
			return fmt.Errorf("context.data_classification %q is not a classification level", level)
		}
		req.Classification = task.Level(level)
	}
	if tenant != "" {
		if !plainName(tenant) {
			return fmt.Errorf("context.tenant %q is not a plain name (letters, digits and . _ - ~ : @ only)", tenant)
		}
		req.Tenant = tenant
	}
	if op == task.OpSend || op == task.OpStream {
		m := &task.MessageSummary{Role: "user"}
		var err error
		if m.References, err = stringList(ctx, "reference_task_ids", "context."); err != nil {
			return err
		}
		if m.FileURIs, err = stringList(ctx, "file_uris", "context."); err != nil {
			return err
		}
		if m.Parts, err = partsOf(ctx); err != nil {
			return err
		}
		req.Message = m
	}
	if err := callbackInto(req, ctx); err != nil {
		return err
	}
	if p, ok := ctx["protocol"]; ok && p != nil {
		obj, ok := p.(map[string]any)
		if !ok {
			return errors.New("context.protocol must be an object")
		}
		var binding string
		if err := stringsInto(obj, "context.protocol.", []field{{"name", &req.Protocol.Name}, {"version", &req.Protocol.Version},
			{"binding", &binding}, {"method", &req.Protocol.Method}}); err != nil {
			return err
		}
		req.Protocol.Binding = task.Binding(binding)
	}
	if r, ok := ctx["request"]; ok && r != nil {
		obj, ok := r.(map[string]any)
		if !ok {
			return errors.New("context.request must be an object")
		}
		if err := stringsInto(obj, "context.request.", []field{{"method", &qn.Method}, {"path", &qn.Path},
			{"host", &qn.Host}, {"source_address", &qn.SourceAddress}}); err != nil {
			return err
		}
	}
	return nil
}

// callbackInto reads context.callback, the push config a send or
// push_config.set carries: its URL, whether it has a token (the token
// itself stays with the enforcement point) and its auth scheme.
func callbackInto(req *task.Request, ctx map[string]any) error {
	raw, ok := ctx["callback"]
	if !ok || raw == nil {
		return nil
	}
	cb, ok := raw.(map[string]any)
	if !ok {
		return errors.New("context.callback must be an object")
	}
	switch req.Operation {
	case task.OpSend, task.OpStream, task.OpPushSet:
	default:
		return fmt.Errorf("context.callback: %s sets no push config", req.Operation)
	}
	p := task.PushConfig{}
	if err := stringsInto(cb, "context.callback.", []field{{"url", &p.URL}, {"auth_scheme", &p.AuthScheme}}); err != nil {
		return err
	}
	if p.URL == "" {
		return errors.New("context.callback.url is required")
	}
	switch t := cb["has_token"].(type) {
	case nil:
	case bool:
		if t {
			// The policy reads only that there is one.
			p.Token = "(held by the enforcement point)"
		}
	default:
		return errors.New("context.callback.has_token must be a boolean")
	}
	req.Push = &p
	return nil
}

// partsOf reads context.parts: {text, file, data} counts.
func partsOf(ctx map[string]any) (task.PartCounts, error) {
	var pc task.PartCounts
	raw, ok := ctx["parts"]
	if !ok || raw == nil {
		return pc, nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return pc, errors.New("context.parts must be an object")
	}
	for k, dst := range map[string]*int{"text": &pc.Text, "file": &pc.File, "data": &pc.Data} {
		v, ok := obj[k]
		if !ok || v == nil {
			continue
		}
		n, ok := v.(json.Number)
		if !ok {
			return pc, fmt.Errorf("context.parts.%s must be a count", k)
		}
		i, err := n.Int64()
		if err != nil || i < 0 || i > 1<<20 {
			return pc, fmt.Errorf("context.parts.%s must be a count", k)
		}
		*dst = int(i)
	}
	return pc, nil
}

// field is a string member of an object and where to put it.
type field struct {
	key string
	dst *string
}

// stringsInto sets each field's destination to its member of m when that
// is a string (absent leaves it); another kind of value is an error.
func stringsInto(m map[string]any, where string, fields []field) error {
	for _, f := range fields {
		v, ok := m[f.key]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s%s must be a string", where, f.key)
		}
		*f.dst = s
	}
	return nil
}

// strings_ reads m[k] as a list of strings (nil when absent).
func stringList(m map[string]any, k, where string) ([]string, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s%s must be an array of strings", where, k)
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("%s%s must be an array of strings", where, k)
		}
		out = append(out, s)
	}
	return out, nil
}

// plainName accepts what a request may name as its tenant: letters, digits
// and . _ - ~ : @, at most 256 bytes, not "." or "..".
func plainName(s string) bool {
	if s == "." || s == ".." || len(s) > 256 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '-', c == '~', c == ':', c == '@':
		default:
			return false
		}
	}
	return true
}

// operationNames are writ/v1's operations.
func operationNames() []string {
	var out []string
	for _, f := range task.Operations() {
		out = append(out, string(f.Op))
	}
	return out
}

// verdictResult is the core's verdict as an AuthZEN decision, under the
// disclosure rules the verdict already applied.
func verdictResult(v proxy.Verdict) result {
	c := map[string]any{}
	if v.DecisionID != "" {
		c["decision_id"] = v.DecisionID
	}
	if v.DryRun {
		c["dry_run"] = true
	}
	switch {
	case v.Allow:
	case v.NotFound:
		c["reason"], c["status"], c["message"] = "not_found", http.StatusNotFound, "agent not found"
	default:
		f := v.Fault
		st := wire.HTTPStatus(f.Kind)
		if st >= 500 {
			return failure(st, f.Message, fmt.Errorf("%s: %s", f.Kind, f.Message))
		}
		c["reason"], c["status"], c["message"] = string(f.Kind), st, f.Message
		if len(f.Denials) > 0 {
			list := make([]map[string]any, len(f.Denials))
			for i, dn := range f.Denials {
				list[i] = map[string]any{"code": dn.Code, "reason": dn.Reason}
			}
			c["denials"] = list
		}
	}
	if len(c) == 0 {
		c = nil
	}
	return result{Decision: v.Allow, Context: c}
}

// candidates: the agents (a resource search, filtered as the directory is:
// an agent this caller may not discover is never listed), or the
// operations that apply to the resource (an action search). Callers are
// the identity provider's, not writ's: a subject search has none.
func (e *delegationEval) candidates(ctx context.Context, kind searchKind, q *query) ([]map[string]any, error) {
	switch kind {
	case searchResource:
		if str(q.Resource, "type") != typeAgent {
			return nil, nil
		}
		var out []map[string]any
		for _, name := range e.d.agents {
			agent := map[string]any{"type": typeAgent, "id": name}
			if str(q.Action, "name") != string(task.OpDiscover) {
				probe := query{Subject: q.Subject, Action: map[string]any{"name": string(task.OpDiscover)}, Resource: agent,
					Context: q.Context}
				if !e.evaluate(ctx, &probe).Decision {
					continue
				}
			}
			out = append(out, agent)
		}
		return out, nil
	case searchAction:
		t := str(q.Resource, "type")
		var out []map[string]any
		for _, f := range task.Operations() {
			onTask := f.FollowUp || f.Op == task.OpSend || f.Op == task.OpStream
			if (t == typeTask && onTask) || (t == typeAgent && !f.FollowUp) {
				out = append(out, map[string]any{"name": string(f.Op)})
			}
		}
		return out, nil
	}
	return nil, nil
}
