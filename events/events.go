// Package events is what writ's admission core tells its observers: one value
// per decision, request answered, lifecycle change, push attempt and token
// exchange. It is a leaf: the core emits events, and the metrics and the
// decision log consume them without importing the core (the report reads the
// decision log; the admin API reads the engine and the store, not events).
package events

import (
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/task"
)

// Modes: which front door a request came through.
const (
	ModeSidecar  = "sidecar"
	ModeExtAuthz = "ext_authz"
	ModeExtProc  = "ext_proc"
	// ModeEgress: a call the protected agent made through writ's egress
	// listener.
	ModeEgress = "egress"
	// ModeAuthZEN: a question a policy enforcement point asked through the
	// AuthZEN API (proxy/authzen): a decision without a request to forward.
	ModeAuthZEN = "authzen"
	// ModeGRPC: a call through the sidecar's gRPC listener of an agent
	// served over gRPC (agents[].grpc_listen).
	ModeGRPC = "grpc"
)

// Modes lists every mode, for bounded metric labels.
var Modes = []string{ModeSidecar, ModeExtAuthz, ModeExtProc, ModeEgress, ModeAuthZEN, ModeGRPC}

// Directions: whether a decision was about a request coming in to the
// protected agent or going out from it (egress mode). "" is ingress.
const (
	DirectionIngress = "ingress"
	DirectionEgress  = "egress"
)

// Caller is who a decision was about, as observers may record it: never the
// claims, scopes or credentials.
type Caller struct {
	Authenticated bool
	Method        string
	Issuer        string
	AgentID       string
	UserID        string
	Tenant        string
	// Chain is the delegation chain, oldest hop first; read-only.
	Chain []string
}

// Decision is one policy decision and what it was about. It never holds
// message content or credentials. Its slices are read after the sink returns
// and must not be modified.
type Decision struct {
	Time      time.Time
	ID        string
	Mode      string
	Route     string // the protected agent's name (on egress: the agent making the call)
	Operation task.Operation
	Protocol  task.Protocol
	Caller    Caller
	TaskID    string
	ContextID string
	Allow     bool
	DryRun    bool
	Denials   []task.Denial
	Revision  string
	CacheHit  bool
	// Eval is the time the decision itself took; Latency the request's so far.
	Eval    time.Duration
	Latency time.Duration
	// Error is set when the policy failed (the decision then denies, fail closed).
	Error string
	// Identity is why the request's credential was refused, when it was:
	// the decision was then made for an anonymous caller. nil otherwise.
	Identity *IdentityFailure
	// Refused says what the caller got when the request did not go on: a fault
	// kind ("task_not_found", "denied", ...), "not_found" for a hidden agent,
	// "not_listed" for a directory entry. It may differ from Allow: a task the
	// caller may not see is refused whatever the policy said.
	Refused string

	// ChainID is the delegation's chain id (the token's txn claim), shared by
	// every decision on every hop of one delegation; "" when the caller's
	// credential names none.
	ChainID string
	// Direction is DirectionIngress or DirectionEgress; "" means ingress.
	Direction string
	// The fields below are set on egress decisions, where writ decides a call
	// its agent makes.
	//
	// ParentDecisionID is the inbound (ingress) decision the call descends
	// from: the decision that admitted the request the agent is serving.
	ParentDecisionID string
	// Initiator is the chain's first principal: the subject (sub) of the
	// token the delegation started with.
	Initiator string
	// Intermediaries are the agents the delegation passed through, oldest
	// first, the agent making this call last (the outbound token's act
	// chain); read-only.
	Intermediaries []string
	// Target is the agent the call goes to, by the name its own writ routes
	// it under (its ingress decision's Route).
	Target string

	// Input is the policy input the decision was made on, as the decision
	// log may record it (decision_log.include_input); nil unless asked for.
	Input Input

	// TraceID and SpanID name the decision's span (writ.decide) in its
	// OpenTelemetry trace, lower-case hex as W3C trace context writes them;
	// "" when tracing is off.
	TraceID, SpanID string
}

// Input is a decision's policy input as an observer may record it: redacted
// as every event is (no message content, no token, no credential), and
// without the members the configuration masks. It is encoded when the
// observer writes it, after the request has moved on: the input behind it
// does not change once decided.
type Input interface {
	// AppendJSON appends the input as one JSON object.
	AppendJSON(b []byte) []byte
	// Version is the input document's version ("writ/v1").
	Version() string
	// Masked are the members left out, as paths ("input.caller.user_id");
	// read-only.
	Masked() []string
}

// IdentityFailure is a refused credential as observers may record it: the
// failure's stable code (identity.Code*), what the credential presented and
// what writ accepts. Never the credential itself; its slices are read-only.
type IdentityFailure struct {
	Code      string
	Presented PresentedCredential
	Accepted  AcceptedCredentials
}

// PresentedCredential is what a refused credential said of itself, read
// without being believed: a JWT's iss, aud, kid and alg, a certificate's
// SPIFFE ID.
type PresentedCredential struct {
	Issuer    string
	Audiences []string
	KeyID     string
	Algorithm string
	SPIFFEID  string
}

// AcceptedCredentials is what writ accepts where a refusal concerns it: the
// issuers, the named issuer's audiences and key ids, the mTLS trust domain.
type AcceptedCredentials struct {
	Issuers     []string
	Audiences   []string
	KeyIDs      []string
	TrustDomain string
}

// Upstream failures, as Request.UpstreamFailure.
const (
	UpstreamUnavailable = "unavailable"
	UpstreamTimeout     = "timeout"
	UpstreamBroken      = "broken" // the answer or stream broke off, or was too large
)

// Request is one request answered by a front door.
type Request struct {
	Mode      string
	Route     string
	Operation task.Operation
	Status    int
	Duration  time.Duration
	// Upstream is the time the agent took to answer (zero when not forwarded).
	Upstream time.Duration
	// UpstreamFailure says why the agent's answer did not arrive ("" when it did).
	UpstreamFailure string
	// InvalidAnswers counts upstream answers (or stream events) that were not
	// valid for their protocol, or too large.
	InvalidAnswers int
}

// Task event kinds, as Task.Kind.
const (
	TaskCreated      = "task_created"
	TaskStateChanged = "task_state_changed"
	TaskArtifact     = "task_artifact"
	TaskViolation    = "task_protocol_violation"
	TaskEvicted      = "task_evicted"
	// TaskUpstreamError: the agent answered an allowed request (or a stream
	// event of its answer) with a protocol error, passed on to the caller as
	// the agent's own answer (Task.Upstream says which).
	TaskUpstreamError = "upstream_error"
)

// UpstreamError is a protocol error an agent answered with: its code (a
// JSON-RPC or A2A code, an HTTP status for an HTTP+JSON error), writ's kind
// for it, and its message, bounded (MaxUpstreamMessage bytes).
type UpstreamError struct {
	Code    int
	Kind    string
	Message string
}

// MaxUpstreamMessage bounds the agent's error message an event carries: the
// agent's text, which writ records but does not vouch for.
const MaxUpstreamMessage = 256

// Task is one lifecycle event.
type Task struct {
	Time      time.Time
	Kind      string
	Route     string
	TaskID    string
	ContextID string
	// DecisionID is the decision that admitted the request whose answer
	// revealed the task (task_created).
	DecisionID string
	From, To   task.State
	Artifact   string
	// Reason says why a task was evicted (task_evicted).
	Reason string
	// Upstream is the agent's error (upstream_error).
	Upstream *UpstreamError
}

// Push is one push delivery attempt, or a notification's final outcome.
type Push struct {
	Time      time.Time
	TaskID    string
	ContextID string
	// Host is the receiver's host[:port]; never its path, query or token.
	Host string
	// Attempt is the attempt's number (for an outcome: the attempts made).
	Attempt int
	Status  int // the receiver's HTTP status; 0 when none arrived
	// Final marks a notification's final outcome (delivered or given up).
	Final     bool
	Delivered bool
	// Reason is a short, stable reason for a failure ("status_503", "timeout",
	// "refused:private_address", ...); Refused is the SSRF guard's reason alone.
	Reason  string
	Refused string
	// Latency runs from the notification's enqueueing to this attempt or outcome.
	Latency time.Duration
}

// Exchange outcomes, as Exchange.Outcome.
const (
	ExchangeIssued   = "issued"    // the STS issued a new token
	ExchangeCacheHit = "cache_hit" // a cached token was still good
	ExchangeFailed   = "failed"    // no token: the STS failed, refused, or answered what writ refuses
)

// Exchange is one outbound token obtained, or not, by RFC 8693 token
// exchange at an STS (egress). It never holds a token or a claim.
type Exchange struct {
	Time time.Time
	// Audience is the target the token was asked for.
	Audience string
	Outcome  string
	// Shared marks a caller that waited for another caller's exchange of
	// the same token (one STS call for concurrent misses).
	Shared bool
	// Error is a short, stable kind when Outcome is ExchangeFailed:
	// "unavailable", "timeout", "refused:<RFC 6749 code>", "invalid_answer",
	// "wrong_audience", "wrong_issuer", "expired", "bad_signature",
	// "actor_credential", "invalid_request".
	Error string
	// Latency is the time the exchange took (a cache hit's: the lookup).
	Latency time.Duration
}

// ExchangeSink receives exchange events. It is separate from Sink so that an
// observer that does not count exchanges need not know them: the Bus passes
// exchange events to the subscribed sinks that implement it. The same rules
// as Sink's hold: safe for concurrent use, fast, never blocking.
type ExchangeSink interface {
	Exchanged(Exchange)
}

// ShadowVerdict is one policy set's side of a shadow comparison.
type ShadowVerdict struct {
	Allow bool
	// Codes are the denial codes, sorted, each once (none when Allow).
	Codes    []string
	Revision string
}

// ShadowDisagreement is a decision the shadow policy set (policies_shadow:)
// would have made otherwise than the live set. The live decision stood.
type ShadowDisagreement struct {
	Time time.Time
	// DecisionID is the live decision's id (its decision line's).
	DecisionID string
	// Route and Operation are the decision's target agent and operation.
	Route, Operation string
	Live, Shadow     ShadowVerdict
	// Direction is "allow_to_deny", "deny_to_allow" or "codes" (both deny,
	// for different codes); Code is the first code that differs.
	Direction, Code string
}

// ShadowSink receives shadow disagreements; like ExchangeSink it is apart
// from Sink, and the Bus passes the events to the sinks that implement it.
type ShadowSink interface {
	ShadowDisagreed(ShadowDisagreement)
}

// Sink receives events. Implementations must be safe for concurrent use, fast,
// and must not block: they are called on the request path (queue anything slow).
type Sink interface {
	Decided(Decision)
	Served(Request)
	TaskChanged(Task)
	Pushed(Push)
}

// Bus fans events out to the sinks subscribed to it. Producers hold the Bus
// from the start; observers, built later from the producers' snapshots,
// subscribe to it, so nothing needs a construction cycle. Safe for concurrent
// use; the zero value has no sinks.
type Bus struct {
	sinks atomic.Pointer[[]Sink]
}

var _ Sink = (*Bus)(nil)

// Subscribe adds s to the sinks.
func (b *Bus) Subscribe(s Sink) {
	for {
		old := b.sinks.Load()
		var next []Sink
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, s)
		if b.sinks.CompareAndSwap(old, &next) {
			return
		}
	}
}

func (b *Bus) list() []Sink {
	if p := b.sinks.Load(); p != nil {
		return *p
	}
	return nil
}

// Decided implements Sink.
func (b *Bus) Decided(e Decision) {
	for _, s := range b.list() {
		s.Decided(e)
	}
}

// Served implements Sink.
func (b *Bus) Served(e Request) {
	for _, s := range b.list() {
		s.Served(e)
	}
}

// TaskChanged implements Sink.
func (b *Bus) TaskChanged(e Task) {
	for _, s := range b.list() {
		s.TaskChanged(e)
	}
}

// Pushed implements Sink.
func (b *Bus) Pushed(e Push) {
	for _, s := range b.list() {
		s.Pushed(e)
	}
}

var _ ExchangeSink = (*Bus)(nil)

// Exchanged implements ExchangeSink: the sinks that implement it get e.
func (b *Bus) Exchanged(e Exchange) {
	for _, s := range b.list() {
		if x, ok := s.(ExchangeSink); ok {
			x.Exchanged(e)
		}
	}
}

var _ ShadowSink = (*Bus)(nil)

// ShadowDisagreed implements ShadowSink: the sinks that implement it get e.
func (b *Bus) ShadowDisagreed(e ShadowDisagreement) {
	for _, s := range b.list() {
		if x, ok := s.(ShadowSink); ok {
			x.ShadowDisagreed(e)
		}
	}
}

// Nop is a Sink that ignores every event; embed it to implement part of Sink.
type Nop struct{}

// Decided implements Sink.
func (Nop) Decided(Decision) {}

// Served implements Sink.
func (Nop) Served(Request) {}

// TaskChanged implements Sink.
func (Nop) TaskChanged(Task) {}

// Pushed implements Sink.
func (Nop) Pushed(Push) {}

// Exchanged implements ExchangeSink.
func (Nop) Exchanged(Exchange) {}

// ShadowDisagreed implements ShadowSink.
func (Nop) ShadowDisagreed(ShadowDisagreement) {}
