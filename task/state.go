package task

import (
	"errors"
	"fmt"
)

// State is a task's lifecycle state in writ's own vocabulary. Each protocol's states
// map onto these in its adapter.
type State string

// The states of a task. Succeeded, Cancelled, Failed and Rejected are terminal.
const (
	Queued        State = "queued"
	Running       State = "running"
	AwaitingInput State = "awaiting_input"
	AwaitingAuth  State = "awaiting_auth"
	Succeeded     State = "succeeded"
	Cancelled     State = "cancelled"
	Failed        State = "failed"
	Rejected      State = "rejected"
)

// States lists every state, in lifecycle order.
var States = []State{Queued, Running, AwaitingInput, AwaitingAuth, Succeeded, Cancelled, Failed, Rejected}

// Valid reports whether s is one of the states above.
func (s State) Valid() bool {
	switch s {
	case Queued, Running, AwaitingInput, AwaitingAuth, Succeeded, Cancelled, Failed, Rejected:
		return true
	}
	return false
}

// Terminal reports whether no transition may leave s.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Cancelled, Failed, Rejected:
		return true
	}
	return false
}

// Interrupted reports whether the task waits on its caller (input or auth).
func (s State) Interrupted() bool { return s == AwaitingInput || s == AwaitingAuth }

// transitions is the legal-transition table of the reference delegation model. A
// delegated task is long-running, so it has real intermediate states, and the caller
// may have to act (input, auth) while the callee waits.
var transitions = map[State]map[State]bool{
	Queued:        {Running: true, Rejected: true, Cancelled: true, Failed: true, AwaitingAuth: true},
	Running:       {AwaitingInput: true, AwaitingAuth: true, Succeeded: true, Cancelled: true, Failed: true},
	AwaitingInput: {Running: true, Cancelled: true, Failed: true},
	AwaitingAuth:  {Running: true, Cancelled: true, Failed: true, Rejected: true},
}

// Sentinel errors for illegal moves; a *TransitionError matches one of them with
// errors.Is.
var (
	// ErrTerminal: the task is in a terminal state and cannot move.
	ErrTerminal = errors.New("task is in a terminal state")
	// ErrIllegalTransition: the table has no edge from the current state to the target.
	ErrIllegalTransition = errors.New("illegal task transition")
)

// TransitionError describes a refused move.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	if e.From.Terminal() {
		return fmt.Sprintf("%s is terminal; cannot move to %s", e.From, e.To)
	}
	return fmt.Sprintf("%s -> %s is not a legal transition", e.From, e.To)
}

// Is matches ErrTerminal for moves out of a terminal state and ErrIllegalTransition
// for every refused move.
func (e *TransitionError) Is(target error) bool {
	switch target {
	case ErrIllegalTransition:
		return true
	case ErrTerminal:
		return e.From.Terminal()
	}
	return false
}

// Advance returns the state after moving from one state to another, or a
// *TransitionError. Reporting the current state again (a second "running" update, a
// get that shows a finished task) is not a move and always succeeds; an unknown
// state never does.
func Advance(from, to State) (State, error) {
	if !from.Valid() || !to.Valid() {
		return from, &TransitionError{From: from, To: to}
	}
	if from == to {
		return to, nil
	}
	if from.Terminal() || !transitions[from][to] {
		return from, &TransitionError{From: from, To: to}
	}
	return to, nil
}

// CanMove reports whether Advance(from, to) would succeed.
func CanMove(from, to State) bool {
	_, err := Advance(from, to)
	return err == nil
}

// reachable[from][to] holds when some sequence of legal moves leads from one state
// to the other.
var reachable = func() map[State]map[State]bool {
	out := map[State]map[State]bool{}
	for _, from := range States {
		seen := map[State]bool{}
		queue := []State{from}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for next := range transitions[s] {
				if !seen[next] {
					seen[next] = true
					queue = append(queue, next)
				}
			}
		}
		out[from] = seen
	}
	return out
}()

// Observe is Advance for an observer that sees samples of a task's state rather
// than every move: a blocking answer shows only where the task ended, so
// awaiting_input → succeeded (via running) is legal to observe. A state that no
// sequence of legal moves reaches — anything out of a terminal state, or back to
// queued — is refused with the same *TransitionError as Advance.
func Observe(from, to State) (State, error) {
	if !from.Valid() || !to.Valid() {
		return from, &TransitionError{From: from, To: to}
	}
	if from == to {
		return to, nil
	}
	if from.Terminal() || !reachable[from][to] {
		return from, &TransitionError{From: from, To: to}
	}
	return to, nil
}
