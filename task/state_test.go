package task_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/writ-authz/writ/task"
)

// seedLegal is an independent copy of the seed's TASK_TRANSITIONS (section 2),
// written in A2A vocabulary and mapped through A2A_STATE_TO_INTERNAL by hand.
var seedLegal = map[string][]string{
	"submitted":      {"working", "rejected", "canceled", "failed", "auth-required"},
	"working":        {"input-required", "auth-required", "completed", "canceled", "failed"},
	"input-required": {"working", "canceled", "failed"},
	"auth-required":  {"working", "canceled", "failed", "rejected"},
}

var a2aToInternal = map[string]task.State{
	"submitted":      "queued",
	"working":        "running",
	"input-required": "awaiting_input",
	"auth-required":  "awaiting_auth",
	"completed":      "succeeded",
	"canceled":       "cancelled",
	"failed":         "failed",
	"rejected":       "rejected",
}

var seedTerminal = map[task.State]bool{
	"succeeded": true, "cancelled": true, "failed": true, "rejected": true,
}

func legalEdge(from, to task.State) bool {
	for a2aFrom, targets := range seedLegal {
		if a2aToInternal[a2aFrom] != from {
			continue
		}
		for _, t := range targets {
			if a2aToInternal[t] == to {
				return true
			}
		}
	}
	return false
}

// allStates is written out literally rather than taken from task.States, so a
// state dropped from (or added to) the package list is noticed.
var allStates = []task.State{
	"queued", "running", "awaiting_input", "awaiting_auth",
	"succeeded", "cancelled", "failed", "rejected",
}

func TestStatesListMatchesSeed(t *testing.T) {
	if len(task.States) != len(allStates) {
		t.Fatalf("task.States has %d states, want %d: %v", len(task.States), len(allStates), task.States)
	}
	for i, s := range allStates {
		if task.States[i] != s {
			t.Errorf("task.States[%d] = %q, want %q", i, task.States[i], s)
		}
	}
	if len(a2aToInternal) != 8 {
		t.Fatalf("test table broken: %d mappings", len(a2aToInternal))
	}
}

func TestAdvanceWholeTable(t *testing.T) {
	legalCount := 0
	for _, from := range allStates {
		for _, to := range allStates {
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				got, err := task.Advance(from, to)
				can := task.CanMove(from, to)
				switch {
				case from == to:
					if err != nil {
						t.Fatalf("same-state report must be a no-op success, got %v", err)
					}
					if got != to {
						t.Fatalf("Advance returned %q, want %q", got, to)
					}
					if !can {
						t.Fatal("CanMove = false for a same-state report")
					}
				case legalEdge(from, to):
					legalCount++
					if err != nil {
						t.Fatalf("legal move refused: %v", err)
					}
					if got != to {
						t.Fatalf("Advance returned %q, want %q", got, to)
					}
					if !can {
						t.Fatal("CanMove = false for a legal move")
					}
				default:
					if err == nil {
						t.Fatalf("illegal move accepted (returned %q)", got)
					}
					if got != from {
						t.Errorf("refused move returned %q, want the unchanged %q", got, from)
					}
					if can {
						t.Error("CanMove = true for an illegal move")
					}
					if !errors.Is(err, task.ErrIllegalTransition) {
						t.Errorf("errors.Is(err, ErrIllegalTransition) = false for %v", err)
					}
					var te *task.TransitionError
					if !errors.As(err, &te) {
						t.Fatalf("error %T is not a *TransitionError", err)
					}
					if te.From != from || te.To != to {
						t.Errorf("TransitionError{%q,%q}, want {%q,%q}", te.From, te.To, from, to)
					}
					if seedTerminal[from] {
						if !errors.Is(err, task.ErrTerminal) {
							t.Errorf("move out of terminal %q does not match ErrTerminal: %v", from, err)
						}
						want := fmt.Sprintf("%s is terminal; cannot move to %s", from, to)
						if err.Error() != want {
							t.Errorf("message %q, want %q", err.Error(), want)
						}
					} else {
						if errors.Is(err, task.ErrTerminal) {
							t.Errorf("illegal non-terminal move %s->%s matches ErrTerminal", from, to)
						}
						want := fmt.Sprintf("%s -> %s is not a legal transition", from, to)
						if err.Error() != want {
							t.Errorf("message %q, want %q", err.Error(), want)
						}
					}
				}
			})
		}
	}
	if legalCount != 17 {
		t.Errorf("seed table has 17 legal edges, the loop saw %d", legalCount)
	}
}

func TestTransitionErrorMessages(t *testing.T) {
	tests := []struct {
		from, to task.State
		want     string
		terminal bool
	}{
		{task.Succeeded, task.Running, "succeeded is terminal; cannot move to running", true},
		{task.Cancelled, task.Queued, "cancelled is terminal; cannot move to queued", true},
		{task.Failed, task.Succeeded, "failed is terminal; cannot move to succeeded", true},
		{task.Rejected, task.AwaitingAuth, "rejected is terminal; cannot move to awaiting_auth", true},
		{task.Queued, task.Succeeded, "queued -> succeeded is not a legal transition", false},
		{task.Queued, task.AwaitingInput, "queued -> awaiting_input is not a legal transition", false},
		{task.AwaitingInput, task.Succeeded, "awaiting_input -> succeeded is not a legal transition", false},
		{task.AwaitingInput, task.AwaitingAuth, "awaiting_input -> awaiting_auth is not a legal transition", false},
		{task.AwaitingInput, task.Rejected, "awaiting_input -> rejected is not a legal transition", false},
		{task.AwaitingAuth, task.Succeeded, "awaiting_auth -> succeeded is not a legal transition", false},
		{task.Running, task.Queued, "running -> queued is not a legal transition", false},
		{task.Running, task.Rejected, "running -> rejected is not a legal transition", false},
	}
	for _, tt := range tests {
		_, err := task.Advance(tt.from, tt.to)
		if err == nil {
			t.Errorf("Advance(%s, %s) succeeded", tt.from, tt.to)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Advance(%s, %s): %q, want %q", tt.from, tt.to, err.Error(), tt.want)
		}
		if got := errors.Is(err, task.ErrTerminal); got != tt.terminal {
			t.Errorf("Advance(%s, %s): Is(ErrTerminal) = %v, want %v", tt.from, tt.to, got, tt.terminal)
		}
		if !errors.Is(err, task.ErrIllegalTransition) {
			t.Errorf("Advance(%s, %s): not ErrIllegalTransition", tt.from, tt.to)
		}
		// A wrapped TransitionError keeps matching.
		wrapped := fmt.Errorf("store: %w", err)
		if !errors.Is(wrapped, task.ErrIllegalTransition) || errors.Is(wrapped, task.ErrTerminal) != tt.terminal {
			t.Errorf("wrapped Advance(%s, %s) error lost its sentinels", tt.from, tt.to)
		}
	}
	// A TransitionError matches no unrelated error.
	te := &task.TransitionError{From: task.Queued, To: task.Succeeded}
	if errors.Is(te, errors.New("illegal task transition")) {
		t.Error("TransitionError matched a different error with the same text")
	}
}

func TestAdvanceInvalidStates(t *testing.T) {
	tests := []struct{ from, to task.State }{
		{"", task.Running},
		{task.Queued, ""},
		{"", ""},
		{"bogus", "bogus"},
		{"working", "running"},        // A2A vocabulary is not writ's
		{task.Running, "completed"},   // nor is this
		{"Running", task.Succeeded},   // case matters
		{task.Queued, "running "},     // no trimming
		{task.Succeeded, "nonsense"},  // terminal source, invalid target
		{"submitted", task.Running},   // seed name
		{"input-required", "working"}, // seed names
	}
	for _, tt := range tests {
		got, err := task.Advance(tt.from, tt.to)
		if err == nil {
			t.Errorf("Advance(%q, %q) = %q, nil; want an error", tt.from, tt.to, got)
			continue
		}
		if got != tt.from {
			t.Errorf("Advance(%q, %q) returned %q, want the unchanged %q", tt.from, tt.to, got, tt.from)
		}
		if !errors.Is(err, task.ErrIllegalTransition) {
			t.Errorf("Advance(%q, %q): %v is not ErrIllegalTransition", tt.from, tt.to, err)
		}
		if task.CanMove(tt.from, tt.to) {
			t.Errorf("CanMove(%q, %q) = true", tt.from, tt.to)
		}
	}
}

func TestStatePredicates(t *testing.T) {
	tests := []struct {
		s                            task.State
		valid, terminal, interrupted bool
	}{
		{"queued", true, false, false},
		{"running", true, false, false},
		{"awaiting_input", true, false, true},
		{"awaiting_auth", true, false, true},
		{"succeeded", true, true, false},
		{"cancelled", true, true, false},
		{"failed", true, true, false},
		{"rejected", true, true, false},
		{"", false, false, false},
		{"canceled", false, false, false}, // A2A spelling
		{"completed", false, false, false},
		{"input-required", false, false, false},
		{"QUEUED", false, false, false},
	}
	for _, tt := range tests {
		if got := tt.s.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v, want %v", tt.s, got, tt.valid)
		}
		if got := tt.s.Terminal(); got != tt.terminal {
			t.Errorf("%q.Terminal() = %v, want %v", tt.s, got, tt.terminal)
		}
		if got := tt.s.Interrupted(); got != tt.interrupted {
			t.Errorf("%q.Interrupted() = %v, want %v", tt.s, got, tt.interrupted)
		}
	}
	// Every terminal state has no outgoing edge other than itself, and every
	// non-terminal state has at least one.
	for _, from := range allStates {
		out := 0
		for _, to := range allStates {
			if from != to && task.CanMove(from, to) {
				out++
			}
		}
		if seedTerminal[from] && out != 0 {
			t.Errorf("terminal %q has %d outgoing moves", from, out)
		}
		if !seedTerminal[from] && out == 0 {
			t.Errorf("non-terminal %q has no outgoing move", from)
		}
	}
}
