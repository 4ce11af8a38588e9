package decisionlog

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/jsonstr"
	"github.com/writ-authz/writ/task"
)

// The values of a line's "type". The task kinds are the events' task kinds.
const (
	TypeDecision              = "decision"
	TypeTaskCreated           = events.TaskCreated
	TypeTaskStateChanged      = events.TaskStateChanged
	TypeTaskArtifact          = events.TaskArtifact
	TypeTaskProtocolViolation = events.TaskViolation
	TypeTaskEvicted           = events.TaskEvicted
	TypeUpstreamError         = events.TaskUpstreamError
	TypePushAttempt           = "push_attempt"
	TypePushDelivered         = "push_delivered"
	TypePushFailed            = "push_failed"
	// TypeShadowDisagreement is a decision the shadow policy set would have
	// made otherwise (policies_shadow:); the live decision stood.
	TypeShadowDisagreement = "shadow_disagreement"
	// The custody lines: writ's own account of the log itself (custody.go).
	TypeLogStarted   = "log_started"
	TypeLogContinued = "log_continued"
	TypeCheckpoint   = "checkpoint"
	TypeLinesLost    = "lines_lost"
)

// OPAPath is the "path" of decision lines in the OPA format.
const OPAPath = "writ/authz/decision"

// OPALifecyclePath prefixes the "path" of a lifecycle line shipped as an
// OPA event: writ/lifecycle/<its type> (writ/lifecycle/task_created).
const OPALifecyclePath = "writ/lifecycle/"

// Line is one line of the writ format, decoded: readers (writ report) unmarshal
// each line into it. Keys are omitted when empty, except that decision lines
// always carry allow and caller (with caller.authenticated), push lines
// always carry push.delivered, and every line carries seq and prev (the
// digest chain, custody.go).
type Line struct {
	Time       time.Time `json:"time"`
	Type       string    `json:"type"`
	DecisionID string    `json:"decision_id,omitempty"`
	// TraceID and SpanID are the decision's span in its OpenTelemetry
	// trace (tracing on).
	TraceID          string      `json:"trace_id,omitempty"`
	SpanID           string      `json:"span_id,omitempty"`
	ChainID          string      `json:"chain_id,omitempty"`
	Direction        string      `json:"direction,omitempty"`
	ParentDecisionID string      `json:"parent_decision_id,omitempty"`
	Mode             string      `json:"mode,omitempty"`
	Route            string      `json:"route,omitempty"`
	Operation        string      `json:"operation,omitempty"`
	Protocol         string      `json:"protocol,omitempty"`
	Caller           *LineCaller `json:"caller,omitempty"`
	// Initiator, Intermediaries and Target are an egress decision's
	// delegation: who started it, the agents it passed through (the caller
	// last), and the agent called.
	Initiator      string        `json:"initiator,omitempty"`
	Intermediaries []string      `json:"intermediaries,omitempty"`
	Target         string        `json:"target,omitempty"`
	TaskID         string        `json:"task_id,omitempty"`
	ContextID      string        `json:"context_id,omitempty"`
	Allow          bool          `json:"allow,omitempty"`
	DryRun         bool          `json:"dry_run,omitempty"`
	Denials        []task.Denial `json:"denials,omitempty"`
	PolicyRevision string        `json:"policy_revision,omitempty"`
	CacheHit       bool          `json:"cache_hit,omitempty"`
	LatencyMS      float64       `json:"latency_ms,omitempty"`
	EvalMS         float64       `json:"eval_ms,omitempty"`
	Error          string        `json:"error,omitempty"`
	// IdentityError is why the caller's credential was refused (a decision
	// line: the decision was then made for an anonymous caller).
	IdentityError *LineIdentityError `json:"identity_error,omitempty"`
	Refused       string             `json:"refused,omitempty"`
	From          string             `json:"from,omitempty"`
	To            string             `json:"to,omitempty"`
	Artifact      string             `json:"artifact,omitempty"`
	Reason        string             `json:"reason,omitempty"`
	Push          *LinePush          `json:"push,omitempty"`
	// Live and Shadow are the two verdicts of a shadow_disagreement line,
	// Direction ("allow_to_deny", "deny_to_allow", "codes") and Code (the
	// first code that differs) how they differ.
	Live   *LineVerdict `json:"live,omitempty"`
	Shadow *LineVerdict `json:"shadow,omitempty"`
	Code   string       `json:"code,omitempty"`
	// UpstreamError is the agent's protocol error (an upstream_error line).
	UpstreamError *LineUpstreamError `json:"upstream_error,omitempty"`
	// InputVersion, InputMasked and Input are the policy input the decision
	// was made on, on decision lines when decision_log.include_input is on:
	// its version ("writ/v1"), the members masked out of it
	// (decision_log.mask) and the input itself, redacted as the rest of the
	// line is (writ policy replay reads them).
	InputVersion string          `json:"input_version,omitempty"`
	InputMasked  []string        `json:"input_masked,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`

	// The custody lines' own fields (custody.go).
	LogID     string `json:"log_id,omitempty"`
	Continues string `json:"continues,omitempty"`
	JWS       string `json:"jws,omitempty"`
	Dropped   uint64 `json:"dropped,omitempty"`
	Failed    uint64 `json:"failed,omitempty"`

	// Seq is the line's number in its log (its log_started line is 1); Prev
	// the hex SHA-256 of the line before it, newline included.
	Seq  uint64 `json:"seq"`
	Prev string `json:"prev"`
}

// LineVerdict is one policy set's verdict on a shadow_disagreement line.
type LineVerdict struct {
	Allow    bool     `json:"allow"`
	Codes    []string `json:"codes,omitempty"`
	Revision string   `json:"revision"`
}

// LineCaller is the caller of a decision line: who, never their credentials or
// claims.
type LineCaller struct {
	Authenticated bool     `json:"authenticated"`
	Method        string   `json:"method,omitempty"`
	Issuer        string   `json:"issuer,omitempty"`
	AgentID       string   `json:"agent_id,omitempty"`
	UserID        string   `json:"user_id,omitempty"`
	Tenant        string   `json:"tenant,omitempty"`
	Chain         []string `json:"chain,omitempty"`
}

// LineIdentityError is a refused credential: the failure's code, what the
// credential presented (a JWT's iss, aud, kid and alg, read without being
// believed; a certificate's SPIFFE ID) and what writ accepts. Never the
// token.
type LineIdentityError struct {
	Code      string            `json:"code"`
	Presented LinePresented     `json:"presented"`
	Accepted  LineAcceptedCreds `json:"accepted"`
}

// LinePresented is what a refused credential said of itself.
type LinePresented struct {
	Issuer    string   `json:"iss,omitempty"`
	Audiences []string `json:"aud,omitempty"`
	KeyID     string   `json:"kid,omitempty"`
	Algorithm string   `json:"alg,omitempty"`
	SPIFFEID  string   `json:"spiffe_id,omitempty"`
}

// LineAcceptedCreds is what writ accepts where a refusal concerns it.
type LineAcceptedCreds struct {
	Issuers     []string `json:"issuers,omitempty"`
	Audiences   []string `json:"audiences,omitempty"`
	KeyIDs      []string `json:"kids,omitempty"`
	TrustDomain string   `json:"trust_domain,omitempty"`
}

// LineUpstreamError is a protocol error the agent answered with.
type LineUpstreamError struct {
	Code    int    `json:"code,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message,omitempty"`
}

// LinePush is the delivery of a push line: the callback's host only, never its
// path, query, token or credentials.
type LinePush struct {
	Host      string `json:"host,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	Status    int    `json:"status,omitempty"`
	Delivered bool   `json:"delivered"`
	Reason    string `json:"reason,omitempty"`
}

// enc appends one JSON value to b; comma says whether the next key or array
// element needs a separator.
type enc struct {
	b     []byte
	comma bool
}

func (e *enc) begin() { e.b = append(e.b, '{'); e.comma = false }

// seal writes a line's place in the digest chain: its seq and the digest of
// the line before it. It comes last, so that a reader sees the line first.
func (e *enc) seal(s *seal) {
	if s == nil {
		return // an event outside the log (OPAEvent): no place in its chain
	}
	e.key("seq")
	e.b = strconv.AppendUint(e.b, s.seq, 10)
	e.key("prev")
	e.b = append(e.b, '"')
	e.b = appendHex(e.b, s.prev[:])
	e.b = append(e.b, '"')
}
func (e *enc) end() { e.b = append(e.b, '}'); e.comma = true }

// key writes "k": — keys are constant ASCII and need no escaping.
func (e *enc) key(k string) {
	if e.comma {
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
	e.comma = true
}

func (e *enc) str(k, v string) {
	if v != "" {
		e.key(k)
		e.b = jsonstr.Append(e.b, v)
	}
}

func (e *enc) boolean(k string, v bool) {
	e.key(k)
	e.b = strconv.AppendBool(e.b, v)
}

func (e *enc) trueOnly(k string, v bool) {
	if v {
		e.boolean(k, true)
	}
}

func (e *enc) integer(k string, v int64) {
	if v != 0 {
		e.key(k)
		e.b = strconv.AppendInt(e.b, v, 10)
	}
}

// millis writes a duration in milliseconds, as a float.
func (e *enc) millis(k string, d time.Duration) {
	if d != 0 {
		e.key(k)
		e.b = strconv.AppendFloat(e.b, float64(d)/float64(time.Millisecond), 'f', -1, 64)
	}
}

func (e *enc) time(k string, t time.Time) {
	e.key(k)
	e.b = append(e.b, '"')
	e.b = t.UTC().AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, '"')
}

func (e *enc) strings(k string, v []string) {
	if len(v) == 0 {
		return
	}
	e.key(k)
	e.b = append(e.b, '[')
	for i, s := range v {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = jsonstr.Append(e.b, s)
	}
	e.b = append(e.b, ']')
}

func (e *enc) denials(k string, v []task.Denial) {
	if len(v) == 0 {
		return
	}
	e.key(k)
	e.b = append(e.b, '[')
	for i := range v {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.begin()
		e.str("code", v[i].Code)
		e.str("reason", v[i].Reason)
		e.end()
	}
	e.b = append(e.b, ']')
}

// caller writes the caller fields of the schema and nothing else: Claims,
// nothing else of the caller is in an event.
func (e *enc) caller(k string, c *events.Caller) {
	e.key(k)
	e.begin()
	e.boolean("authenticated", c.Authenticated)
	e.str("method", c.Method)
	e.str("issuer", c.Issuer)
	e.str("agent_id", c.AgentID)
	e.str("user_id", c.UserID)
	e.str("tenant", c.Tenant)
	e.strings("chain", c.Chain)
	e.end()
}

// protocol writes "name/version/binding", trailing empty parts left off
// ("a2a/1.0/jsonrpc", "writ").
func (e *enc) protocol(k string, p task.Protocol) {
	if p.Name == "" && p.Version == "" && p.Binding == "" {
		return
	}
	e.key(k)
	e.b = append(e.b, '"')
	e.b = jsonstr.AppendEscaped(e.b, p.Name)
	if p.Version != "" || p.Binding != "" {
		e.b = append(e.b, '/')
		e.b = jsonstr.AppendEscaped(e.b, p.Version)
	}
	if p.Binding != "" {
		e.b = append(e.b, '/')
		e.b = jsonstr.AppendEscaped(e.b, string(p.Binding))
	}
	e.b = append(e.b, '"')
}

// delegation writes what a decision says of its delegation beyond the caller:
// the chain it belongs to and, on egress, the hop.
func (e *enc) delegation(d *events.Decision) {
	e.str("initiator", d.Initiator)
	e.strings("intermediaries", d.Intermediaries)
	e.str("target", d.Target)
}

// identity writes a refused credential's detail (events.IdentityFailure),
// when there is one.
func (e *enc) identity(k string, f *events.IdentityFailure) {
	if f == nil {
		return
	}
	e.key(k)
	e.begin()
	e.str("code", f.Code)
	e.key("presented")
	e.begin()
	p := &f.Presented
	e.str("iss", p.Issuer)
	e.strings("aud", p.Audiences)
	e.str("kid", p.KeyID)
	e.str("alg", p.Algorithm)
	e.str("spiffe_id", p.SPIFFEID)
	e.end()
	e.key("accepted")
	e.begin()
	a := &f.Accepted
	e.strings("issuers", a.Issuers)
	e.strings("audiences", a.Audiences)
	e.strings("kids", a.KeyIDs)
	e.str("trust_domain", a.TrustDomain)
	e.end()
	e.end()
}

// upstream writes an agent's protocol error (events.UpstreamError), when
// there is one.
func (e *enc) upstream(k string, u *events.UpstreamError) {
	if u == nil {
		return
	}
	e.key(k)
	e.begin()
	e.integer("code", int64(u.Code))
	e.str("kind", u.Kind)
	e.str("message", u.Message)
	e.end()
}

// input writes the policy input a decision was made on, when its event
// carries one: its version, the members masked out, and the input.
func (e *enc) input(in events.Input) {
	if in == nil {
		return
	}
	e.str("input_version", in.Version())
	e.strings("input_masked", in.Masked())
	e.key("input")
	e.b = in.AppendJSON(e.b)
}

// appendDecision writes a decision line in the writ format.
func appendDecision(b []byte, d *events.Decision, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", d.Time)
	e.str("type", TypeDecision)
	e.str("decision_id", d.ID)
	e.str("trace_id", d.TraceID)
	e.str("span_id", d.SpanID)
	e.str("chain_id", d.ChainID)
	e.str("direction", d.Direction)
	e.str("parent_decision_id", d.ParentDecisionID)
	e.str("mode", d.Mode)
	e.str("route", d.Route)
	e.str("operation", string(d.Operation))
	e.protocol("protocol", d.Protocol)
	e.caller("caller", &d.Caller)
	e.delegation(d)
	e.str("task_id", d.TaskID)
	e.str("context_id", d.ContextID)
	e.boolean("allow", d.Allow)
	e.trueOnly("dry_run", d.DryRun)
	e.denials("denials", d.Denials)
	e.str("policy_revision", d.Revision)
	e.trueOnly("cache_hit", d.CacheHit)
	e.millis("latency_ms", d.Latency)
	e.millis("eval_ms", d.Eval)
	e.str("error", d.Error)
	e.identity("identity_error", d.Identity)
	e.str("refused", d.Refused)
	e.input(d.Input)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// OPAEvent is d as an OPA decision-log event: the opa format's line without
// its place in the log's digest chain (seq, prev), and without a newline.
// decision_log.upload ships it; one encoding serves both.
func OPAEvent(d *events.Decision) []byte {
	b := appendOPA(nil, d, nil)
	return b[:len(b)-1]
}

// appendOPA writes a decision line in OPA's decision-log event shape
// (plugins/logs EventV1, whose trace_id and span_id carry the decision's
// span when tracing is on): what the decision was about is its input, allow and
// denials its result; durations are OPA's timer metrics in nanoseconds; the
// policy revision is given both as the deprecated top-level revision and as the
// "writ" bundle's revision. The line's place in the digest chain (seq, prev)
// is in "custom", where OPA's event keeps what is not its own, and so is the
// policy input the decision was made on (include_input: custom's
// input_version, input_masked and input; the event's own input is writ's
// summary of the decision, as without it).
func appendOPA(b []byte, d *events.Decision, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.str("decision_id", d.ID)
	// OPA's own trace_id and span_id: the decision's span in its trace.
	e.str("trace_id", d.TraceID)
	e.str("span_id", d.SpanID)
	e.time("timestamp", d.Time)
	e.str("path", OPAPath)

	e.key("input")
	e.begin()
	e.str("chain_id", d.ChainID)
	e.str("direction", d.Direction)
	e.str("parent_decision_id", d.ParentDecisionID)
	e.str("mode", d.Mode)
	e.str("route", d.Route)
	e.str("operation", string(d.Operation))
	e.protocol("protocol", d.Protocol)
	e.caller("caller", &d.Caller)
	e.delegation(d)
	e.str("task_id", d.TaskID)
	e.str("context_id", d.ContextID)
	e.end()

	e.key("result")
	e.begin()
	e.boolean("allow", d.Allow)
	e.denials("denials", d.Denials)
	e.end()

	e.key("labels")
	e.begin()
	e.str("app", "writ")
	e.end()

	if d.Eval != 0 || d.Latency != 0 {
		e.key("metrics")
		e.begin()
		e.integer("timer_rego_query_eval_ns", int64(d.Eval))
		e.integer("timer_server_handler_ns", int64(d.Latency))
		e.end()
	}
	if d.Revision != "" {
		e.str("revision", d.Revision)
		e.key("bundles")
		e.begin()
		e.key("writ")
		e.begin()
		e.str("revision", d.Revision)
		e.end()
		e.end()
	}
	if d.Error != "" {
		// OPA's errors are {"code", "message"}; internal_error is its code for
		// a failed evaluation.
		e.key("error")
		e.begin()
		e.str("code", "internal_error")
		e.str("message", d.Error)
		e.end()
	}
	e.key("custom")
	e.begin()
	e.trueOnly("dry_run", d.DryRun)
	e.trueOnly("cache_hit", d.CacheHit)
	e.identity("identity_error", d.Identity)
	e.input(d.Input)
	e.seal(s)
	e.end()
	e.end()
	return append(e.b, '\n')
}

// appendTask writes a lifecycle line.
func appendTask(b []byte, t *events.Task, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", t.Time)
	e.str("type", t.Kind)
	e.task(t, true)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// task writes what a lifecycle line says of its task: the one encoding of
// the local line and of the event shipped (appendOPATask), which carries
// the decision (withDecision false) in its custom instead.
func (e *enc) task(t *events.Task, withDecision bool) {
	e.str("route", t.Route)
	e.str("task_id", t.TaskID)
	e.str("context_id", t.ContextID)
	e.str("from", string(t.From))
	e.str("to", string(t.To))
	e.str("artifact", t.Artifact)
	if withDecision {
		e.str("decision_id", t.DecisionID)
	}
	e.str("reason", t.Reason)
	e.upstream("upstream_error", t.Upstream)
}

// PushType is the type of p's line: push_attempt for an attempt,
// push_delivered or push_failed for a notification's final outcome.
func PushType(p *events.Push) string {
	switch {
	case !p.Final:
		return TypePushAttempt
	case p.Delivered:
		return TypePushDelivered
	}
	return TypePushFailed
}

// appendPush writes a push line: the callback's host, never its URL, token or
// credentials, and a stable reason instead of the error text.
func appendPush(b []byte, p *events.Push, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", p.Time)
	e.str("type", PushType(p))
	e.push(p)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// push writes what a push line says of its delivery: the one encoding of
// the local line and of the event shipped (appendOPAPush).
func (e *enc) push(p *events.Push) {
	e.str("task_id", p.TaskID)
	e.str("context_id", p.ContextID)
	e.key("push")
	e.begin()
	e.str("host", p.Host)
	e.integer("attempt", int64(p.Attempt))
	e.integer("status", int64(p.Status))
	e.boolean("delivered", p.Delivered)
	if !p.Delivered {
		e.str("reason", p.Reason)
	}
	e.end()
}

// OPATaskEvent is the lifecycle line of t as an OPA decision-log event of
// its own, id its decision_id (OPA's pipelines key on it, so a lifecycle
// event never takes its decision's): path writ/lifecycle/<type>, input
// what the local line says of the task (the same encoding, so the same
// redaction), and the decision that admitted the request in
// custom.caused_by_decision_id. decision_log.upload ships it.
func OPATaskEvent(t *events.Task, id string) []byte {
	e := enc{}
	e.lifecycle(id, t.Kind, t.Time)
	e.key("input")
	e.begin()
	e.task(t, false)
	e.end()
	e.custom(t.DecisionID)
	e.end()
	return e.b
}

// OPAPushEvent is the push line of p as an OPA decision-log event of its
// own (as OPATaskEvent): input what the local line says of the delivery,
// the receiver's host and never its URL, token or credentials.
func OPAPushEvent(p *events.Push, id string) []byte {
	e := enc{}
	e.lifecycle(id, PushType(p), p.Time)
	e.key("input")
	e.begin()
	e.push(p)
	e.end()
	e.custom("")
	e.end()
	return e.b
}

// lifecycle opens a lifecycle event: its own id, time and path, and
// decisions' labels.
func (e *enc) lifecycle(id, typ string, t time.Time) {
	e.begin()
	e.str("decision_id", id)
	e.time("timestamp", t)
	e.str("path", OPALifecyclePath+typ)
	e.key("labels")
	e.begin()
	e.str("app", "writ")
	e.end()
}

// custom writes a lifecycle event's custom: the decision that caused it,
// when there is one.
func (e *enc) custom(decisionID string) {
	e.key("custom")
	e.begin()
	e.str("caused_by_decision_id", decisionID)
	e.end()
}

// appendShadow writes a shadow_disagreement line: the live decision's id,
// route and operation, and both verdicts (codes and revisions, never the
// input or a reason's text).
func appendShadow(b []byte, d *events.ShadowDisagreement, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", d.Time)
	e.str("type", TypeShadowDisagreement)
	e.str("decision_id", d.DecisionID)
	e.str("route", d.Route)
	e.str("operation", d.Operation)
	e.str("direction", d.Direction)
	e.str("code", d.Code)
	e.verdict("live", &d.Live)
	e.verdict("shadow", &d.Shadow)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// verdict writes one side of a shadow comparison.
func (e *enc) verdict(k string, v *events.ShadowVerdict) {
	e.key(k)
	e.begin()
	e.boolean("allow", v.Allow)
	e.strings("codes", v.Codes)
	e.key("revision") // always present, even empty
	e.b = jsonstr.Append(e.b, v.Revision)
	e.end()
}

const hex = "0123456789abcdef"

// appendHex appends p in lowercase hex.
func appendHex(b []byte, p []byte) []byte {
	for _, c := range p {
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return b
}
