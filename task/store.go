package task

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Record is what writ keeps of one task: who owns it, where it runs and where its
// lifecycle stands. It holds the task's metadata, never its content: a Store drops
// Task.InputText, Task.OutputText and Task.Structured, so a bounded store stays
// bounded and caller data does not outlive the exchange that carried it.
type Record struct {
	// Task is the task's identity, state, owner, delegation chain, classification
	// and artifact names.
	Task Task
	// Agent is the protected agent (route) the task runs on.
	Agent string
	// Protocol names the protocol that created the task, e.g. "a2a".
	Protocol string
	// Version is that protocol's version, e.g. "1.0".
	Version string
	// Created is when the record was created; a Store sets it if it is zero.
	Created time.Time
	// Updated is when the record was last created or changed by an event; a Store
	// always sets it, and expiry counts from it.
	Updated time.Time
	// Violations counts the illegal transitions the upstream reported for this task.
	Violations int
	// Push holds the task's push-notification configs, which writ keeps and
	// delivers itself (the agent never sees them).
	Push []PushConfig
}

// Sentinel errors of a Store. Implementations wrap them with the task id; match
// them with errors.Is.
var (
	// ErrNotFound: no record has the id (it was never created, was deleted,
	// evicted or has expired).
	ErrNotFound = errors.New("task not found")
	// ErrExists: Create was given an id that already has a record.
	ErrExists = errors.New("task already exists")
	// ErrInvalidRecord: Create was given a record without a task id or with an
	// unknown state.
	ErrInvalidRecord = errors.New("invalid task record")
	// ErrPushLimit: a push config over the per-task or per-owner bound.
	ErrPushLimit = errors.New("too many push notification configs")
	// ErrPushNotFound: no push config of the task has the id.
	ErrPushNotFound = errors.New("push notification config not found")
)

// Store keeps the lifecycle records of tasks. The proxy reads it on every follow-up
// request and writes it on every upstream answer, so it sits on the request path.
//
// Contract for every implementation:
//   - All methods are safe for concurrent use.
//   - Every method is O(1), amortised, in the number of records (an event costs
//     at most O(artifact names of its task)). The memory implementation does no
//     I/O; others may, and honour ctx.
//   - Records are values: a returned Record shares no memory with the store, and
//     a Record passed in is copied, so mutating either side's slices changes
//     nothing on the other.
//   - Errors: ErrNotFound, ErrExists and ErrInvalidRecord (errors.Is), a
//     *TransitionError from Apply, and anything else is a technical failure of
//     the backing store (callers fail closed on it).
//   - A store may forget a record at any time to honour its bounds (count, per
//     owner, age); a forgotten record is simply not found.
type Store interface {
	// Get returns a copy of the record of task id. A missing (or expired) task is
	// (Record{}, false, nil), not an error. Get is a read: it does not count as
	// use for recency or expiry.
	Get(ctx context.Context, id string) (Record, bool, error)

	// Create records a task the first time a response reveals it. The task's
	// owner, chain and classification are fixed here; later events cannot change
	// them. A record that already exists is left as is and ErrExists returned.
	Create(ctx context.Context, r Record) error

	// Apply records one event for the existing task id (ev.TaskID is not
	// consulted) and returns the record as updated:
	//   - a state (ev.State, or for a snapshot with no ev.State, ev.Task.State)
	//     moves the task through Observe (an answer may skip intermediate states); an event with no state only touches
	//     artifacts and the context id;
	//   - an artifact event adds its artifact's name (its id if it has no name),
	//     and a snapshot adds its artifact names, in order and without duplicates;
	//   - the context id is filled in if the record has none.
	// An illegal move keeps the current state, increments Violations, applies the
	// rest of the event and returns the updated record together with the
	// *TransitionError (errors.Is ErrIllegalTransition, and ErrTerminal when the
	// task had finished). Repeating the current state is not a move and never a
	// violation. An unknown id is ErrNotFound.
	Apply(ctx context.Context, id string, ev Event) (Record, error)

	// Delete forgets the task id. An unknown id is ErrNotFound.
	Delete(ctx context.Context, id string) error

	// Len is the number of records the store holds.
	Len() int

	// SetPush adds a push config to the task, or replaces the one with the same
	// id; a config without an id gets one. It returns the config as stored.
	// ErrNotFound for an unknown task, ErrPushLimit over a bound.
	SetPush(ctx context.Context, id string, p PushConfig) (PushConfig, error)

	// DeletePush removes the task's push config cid: ErrNotFound for an unknown
	// task, ErrPushNotFound for an unknown config.
	DeletePush(ctx context.Context, id, cid string) error
}

// clone returns a copy of r that shares no memory with it.
func (r Record) clone() Record {
	r.Task.Artifacts = slices.Clone(r.Task.Artifacts)
	r.Task.Chain = slices.Clone(r.Task.Chain)
	r.Task.Structured = nil
	r.Push = slices.Clone(r.Push)
	return r
}
