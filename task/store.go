package task

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Ref names one task: the agent (route) it runs on and its id there. Task ids
// are the agent's own, so two agents may use one id for different tasks: every
// record is keyed by both.
type Ref struct {
	Agent string `json:"agent"`
	ID    string `json:"id"`
}

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

// Ref is the record's key.
func (r *Record) Ref() Ref { return Ref{Agent: r.Agent, ID: r.Task.ID} }

// Sentinel errors of a Store. Implementations wrap them with the task id; match
// them with errors.Is.
var (
	// ErrNotFound: no record has the ref (it was never created, was deleted,
	// evicted or has expired).
	ErrNotFound = errors.New("task not found")
	// ErrExists: Create was given a ref that already has a record.
	ErrExists = errors.New("task already exists")
	// ErrInvalidRecord: Create was given a record without an agent or task id,
	// or with an unknown state.
	ErrInvalidRecord = errors.New("invalid task record")
	// ErrPushLimit: a push config over the per-task or per-owner bound.
	ErrPushLimit = errors.New("too many push notification configs")
	// ErrPushNotFound: no push config of the task has the id.
	ErrPushNotFound = errors.New("push notification config not found")
)

// Eviction reasons, as Eviction.Reason.
const (
	// EvictedStoreFull: the store was at MaxTasks (or MaxContexts).
	EvictedStoreFull = "store_full"
	// EvictedOwnerFull: the owner was at its per-owner bound.
	EvictedOwnerFull = "owner_full"
)

// Eviction reports one live record a store dropped to honour its bounds. Expiry
// and Delete are not evictions.
type Eviction struct {
	// Ref is the task (or, for a context, the agent and the context id).
	Ref Ref
	// Context is set when the evicted entry is a context, not a task.
	Context bool
	Owner   Owner
	State   State
	Reason  string
}

// StoreStats is a snapshot of a store's contents and counters, for metrics.
type StoreStats struct {
	// Tasks is the number of records held.
	Tasks int
	// Contexts is the number of context owners held.
	Contexts int
	// ByState counts the records held in each state; every state is present.
	ByState map[State]int
	// Evicted counts records and contexts dropped to honour their bounds.
	Evicted uint64
	// Expired counts records dropped because their TTL ran out.
	Expired uint64
	// Violations counts the illegal transitions Apply refused, over the store's
	// lifetime (including tasks since forgotten).
	Violations uint64
	// Retired counts the ids added to the retired-id set (an id whose bits
	// were all set already is not counted, so it estimates distinct ids), and
	// RetiredCapacity is how many the set holds at its false-positive rate.
	Retired         uint64
	RetiredCapacity int
}

// Store keeps the lifecycle records of tasks and the owners of contexts. The
// admission core reads it on every follow-up request and writes it on every
// upstream answer, so it sits on the request path.
//
// Contract for every implementation:
//   - All methods are safe for concurrent use, across processes too for a
//     shared store: Apply's state change is atomic (two observers of one task
//     can never move it backwards or both see the same change).
//   - Every method is O(1) or O(log n), amortised, in the number of records (an
//     event costs at most O(artifact names of its task)). Stores that do I/O
//     honour ctx.
//   - Records are values: a returned Record shares no memory with the store, and
//     a Record passed in is copied, so mutating either side's slices changes
//     nothing on the other.
//   - Errors: ErrNotFound, ErrExists, ErrInvalidRecord, ErrPushLimit,
//     ErrPushNotFound, ErrRetired (errors.Is), a *TransitionError from Apply;
//     anything else is a technical failure of the backing store, and callers
//     fail closed on it.
//   - A store may forget a record to honour its bounds (count, per owner, age).
//     It evicts expired and terminal records before live ones, and among live
//     ones the heaviest owner's least recently updated, so one caller cannot
//     flush another's tasks. Every eviction is reported (MemoryLimits.OnEvict).
//     A forgotten record is not found; an evicted one leaves a bounded
//     tombstone with its owner.
//   - An id is never forgotten: every task id Create or ClaimTask records and
//     every context id ClaimContext gives an owner enters the store's
//     retired-id set (retired.go), in the same atomic step, and stays there.
//     Tombstones roll over; the set does not, so an id the store once held
//     and no longer holds is ErrRetired to Tombstone, Context, ClaimTask and
//     ClaimContext for ever (and, at the set's false-positive rate, an id it
//     never held). Sharing stores share the set.
type Store interface {
	// Get returns a copy of the record of ref. A missing (or expired) task is
	// (Record{}, false, nil), not an error. Get is a read: it does not count as
	// use for recency or expiry.
	Get(ctx context.Context, ref Ref) (Record, bool, error)

	// Create records a task the first time a response reveals it. The task's
	// owner, chain and classification are fixed here; later events cannot change
	// them. A record that already exists is left as is and ErrExists returned.
	Create(ctx context.Context, r Record) error

	// ClaimTask is Create for a task that a request named before the store knew
	// it (the migration rule, lifecycle.unknown_tasks: allow), checked and
	// recorded in one atomic step: ErrExists as Create, and ErrRetired, with
	// nothing recorded, when the store once held the task and no longer does,
	// unless a tombstone says r's owner (SameOwner) held it, which takes it back.
	ClaimTask(ctx context.Context, r Record) error

	// Apply records one event for the existing task ref (ev.TaskID is not
	// consulted) and returns the record as it was just before (prev) and as
	// updated (next), read and written in one atomic step:
	//   - a state (ev.State, or for a snapshot with no ev.State, ev.Task.State)
	//     moves the task through Observe (an answer may skip intermediate
	//     states); an event with no state only touches artifacts and the
	//     context id;
	//   - an artifact event adds its artifact's name (its id if it has no name),
	//     and a snapshot adds its artifact names, in order and without duplicates;
	//   - the context id is filled in if the record has none.
	// An illegal move keeps the current state, increments Violations, applies the
	// rest of the event and returns the records together with the
	// *TransitionError (errors.Is ErrIllegalTransition, and ErrTerminal when the
	// task had finished). Repeating the current state is not a move and never a
	// violation. An unknown ref is ErrNotFound.
	Apply(ctx context.Context, ref Ref, ev Event) (prev, next Record, err error)

	// Delete forgets the task ref. An unknown ref is ErrNotFound.
	Delete(ctx context.Context, ref Ref) error

	// SetPush adds a push config to the task, or replaces the one with the same
	// id; a config without an id gets one. It returns the config as stored.
	// ErrNotFound for an unknown task, ErrPushLimit over a bound.
	SetPush(ctx context.Context, ref Ref, p PushConfig) (PushConfig, error)

	// DeletePush removes the task's push config cid: ErrNotFound for an unknown
	// task, ErrPushNotFound for an unknown config.
	DeletePush(ctx context.Context, ref Ref, cid string) error

	// ClaimContext makes owner the owner of the context (or session) ref — its
	// Agent and the context id — unless it already has one, and returns the
	// owner on record: owner itself when the claim took, the earlier owner
	// otherwise. A claim refreshes the context's expiry. A context the store
	// once held and no longer does is not claimed: ErrRetired.
	ClaimContext(ctx context.Context, ref Ref, owner Owner) (Owner, error)

	// Context returns the owner of the context ref, if it has one; a context
	// the store once held and no longer does is ErrRetired.
	Context(ctx context.Context, ref Ref) (Owner, bool, error)

	// Tombstone returns the owner of a task the store evicted recently (within
	// its tombstone bound), so that a claim under the migration rule never
	// takes over an evicted owner's task. Without a tombstone, a task the
	// retired-id set holds is ErrRetired: one the store held once (its
	// tombstone rolled over, or it expired) — or holds now: callers ask about
	// a task Get did not find. ClaimTask checks the same atomically; this is the
	// check before the request is forwarded.
	Tombstone(ctx context.Context, ref Ref) (Owner, bool, error)

	// Stats returns the store's contents and counters.
	Stats(ctx context.Context) (StoreStats, error)
}

// SameOwner reports whether two owners are the same owner for ownership checks:
// same tenant and same agent (the user id is not part of it).
func SameOwner(a, b Owner) bool { return a.Tenant == b.Tenant && a.AgentID == b.AgentID }

// clone returns a copy of r that shares no memory with it.
func (r Record) clone() Record {
	r.Task.Artifacts = slices.Clone(r.Task.Artifacts)
	r.Task.Chain = slices.Clone(r.Task.Chain)
	r.Task.Structured = nil
	r.Push = slices.Clone(r.Push)
	return r
}

// Stored is the copy of r that a store keeps: no content, artifact names
// deduplicated and bounded by maxArtifacts. Stores outside this package use it
// so that every store keeps exactly the same fields.
func Stored(r Record, maxArtifacts int) Record {
	names := r.Task.Artifacts
	r = r.clone()
	r.Task.InputText, r.Task.OutputText = "", ""
	r.Task.Artifacts = nil
	for _, name := range names {
		AddArtifact(&r.Task, name, maxArtifacts)
	}
	return r
}

// AddArtifact appends name to t's artifact names unless it is empty, already
// there, or the list is full. The scan is bounded by limit.
func AddArtifact(t *Task, name string, limit int) {
	if name == "" || len(t.Artifacts) >= limit || slices.Contains(t.Artifacts, name) {
		return
	}
	t.Artifacts = append(t.Artifacts, name)
}

// ApplyEvent applies ev to rec in place, as Store.Apply describes, and returns
// the *TransitionError of an illegal move (rec.Violations is then incremented).
// Every Store applies events through it, so they all follow one rule.
func ApplyEvent(rec *Record, ev Event, maxArtifacts int) error {
	var err error
	to := ev.State
	if to == "" && ev.Task != nil {
		to = ev.Task.State
	}
	if to != "" {
		next, aerr := Observe(rec.Task.State, to)
		if aerr != nil {
			rec.Violations++
			err = aerr
		} else {
			rec.Task.State = next
		}
	}
	if rec.Task.ContextID == "" {
		rec.Task.ContextID = ev.ContextID
		if rec.Task.ContextID == "" && ev.Task != nil {
			rec.Task.ContextID = ev.Task.ContextID
		}
	}
	if ev.Task != nil {
		for _, name := range ev.Task.Artifacts {
			AddArtifact(&rec.Task, name, maxArtifacts)
		}
	}
	if a := ev.Artifact; a != nil {
		name := a.Name
		if name == "" {
			name = a.ID
		}
		AddArtifact(&rec.Task, name, maxArtifacts)
	}
	return err
}

// ValidRecord checks what Create requires of a record.
func ValidRecord(r *Record) error {
	if r.Task.ID == "" || r.Agent == "" {
		return fmt.Errorf("%w: a record needs an agent and a task id", ErrInvalidRecord)
	}
	if !r.Task.State.Valid() {
		return fmt.Errorf("%w: task %q has unknown state %q", ErrInvalidRecord, r.Task.ID, r.Task.State)
	}
	return nil
}
