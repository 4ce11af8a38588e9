package proxy

import (
	"net/http"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// Hooks receive what the sidecar does, for metrics and the decision log. They are
// called on the request path: implementations must be safe for concurrent use,
// fast, and must not block (queue anything slow).
type Hooks interface {
	// Decided is called for every policy decision (requests, directory entries).
	Decided(DecisionEvent)
	// Served is called once per request answered.
	Served(RequestEvent)
	// TaskChanged is called for every lifecycle event writ records.
	TaskChanged(TaskEvent)
}

// Modes of a decision.
const (
	ModeSidecar  = "sidecar"
	ModeExtAuthz = "ext_authz"
)

// DecisionEvent is one decision and what it was about. It never holds message
// content or credentials.
type DecisionEvent struct {
	Time      time.Time
	ID        string
	Mode      string
	Route     string // the protected agent's name
	Operation task.Operation
	Protocol  task.Protocol
	Caller    identity.Caller
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
}

// RequestEvent is one request answered.
type RequestEvent struct {
	Mode      string
	Route     string
	Operation task.Operation
	Status    int
	Duration  time.Duration
	// Upstream is the time the agent took to answer (zero when not forwarded).
	Upstream time.Duration
}

// Task event kinds.
const (
	TaskCreated      = "task_created"
	TaskStateChanged = "task_state_changed"
	TaskArtifact     = "task_artifact"
	TaskViolation    = "task_protocol_violation"
)

// TaskEvent is one lifecycle event.
type TaskEvent struct {
	Time      time.Time
	Kind      string
	Route     string
	TaskID    string
	ContextID string
	From, To  task.State
	Artifact  string
}

// nopHooks is the default: nothing observed.
type nopHooks struct{}

func (nopHooks) Decided(DecisionEvent) {}
func (nopHooks) Served(RequestEvent)   {}
func (nopHooks) TaskChanged(TaskEvent) {}

// MultiHooks fans events out to several hooks.
type MultiHooks []Hooks

// Decided implements Hooks.
func (m MultiHooks) Decided(e DecisionEvent) {
	for _, h := range m {
		h.Decided(e)
	}
}

// Served implements Hooks.
func (m MultiHooks) Served(e RequestEvent) {
	for _, h := range m {
		h.Served(e)
	}
}

// TaskChanged implements Hooks.
func (m MultiHooks) TaskChanged(e TaskEvent) {
	for _, h := range m {
		h.TaskChanged(e)
	}
}

// statusWriter records the status an answer was sent with, keeping Flush.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
