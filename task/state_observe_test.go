package task

import (
	"errors"
	"testing"
)

func TestObserve(t *testing.T) {
	for _, c := range []struct {
		from, to State
		ok       bool
	}{
		{AwaitingInput, Succeeded, true}, // via running: a blocking reply shows only the end
		{Queued, Succeeded, true},        // via running
		{Queued, AwaitingInput, true},    // via running
		{AwaitingAuth, Succeeded, true},  // via running
		{Running, Running, true},
		{Succeeded, Succeeded, true},
		{Running, Queued, false}, // nothing goes back to queued
		{Succeeded, Running, false},
		{Cancelled, Succeeded, false},
		{Running, Rejected, true}, // via awaiting_auth
		{Rejected, Failed, false},
		{"", Running, false},
	} {
		got, err := Observe(c.from, c.to)
		if c.ok != (err == nil) {
			t.Errorf("Observe(%s, %s) = %s, %v", c.from, c.to, got, err)
		}
		if !c.ok {
			if got != c.from || !errors.Is(err, ErrIllegalTransition) {
				t.Errorf("Observe(%s, %s): state %s, err %v", c.from, c.to, got, err)
			}
			if c.from.Terminal() && !errors.Is(err, ErrTerminal) {
				t.Errorf("Observe(%s, %s): not ErrTerminal", c.from, c.to)
			}
		}
	}
	// Every single legal move is also observable.
	for _, from := range States {
		for _, to := range States {
			if CanMove(from, to) {
				if _, err := Observe(from, to); err != nil {
					t.Errorf("legal move %s→%s not observable", from, to)
				}
			}
		}
	}
}
