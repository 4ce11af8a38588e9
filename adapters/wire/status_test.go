package wire_test

import (
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		k    task.Kind
		name string
		want int
	}{
		{task.KindMalformed, "malformed", 400},
		{task.KindNotARequest, "not_a_request", 400},
		{task.KindUnknownOperation, "unknown_operation", 404},
		{task.KindInvalidParams, "invalid_params", 400},
		{task.KindTooLarge, "too_large", 413},
		{task.KindTooDeep, "too_deep", 400},
		{task.KindVersionNotSupported, "version_not_supported", 400},
		{task.KindContentType, "content_type", 415},
		{task.KindTaskNotFound, "task_not_found", 404},
		{task.KindTaskNotCancelable, "task_not_cancelable", 400},
		{task.KindTaskTerminal, "task_terminal", 400},
		{task.KindUnsupported, "unsupported", 400},
		{task.KindPushNotSupported, "push_not_supported", 400},
		{task.KindExtendedCardNotConfigured, "extended_card_not_configured", 400},
		{task.KindUnauthenticated, "unauthenticated", 401},
		{task.KindDenied, "denied", 403},
		{task.KindUpstreamUnavailable, "upstream_unavailable", 502},
		{task.KindUpstreamTimeout, "upstream_timeout", 504},
		{task.KindUpstreamInvalid, "upstream_invalid", 502},
		{task.KindUnavailable, "unavailable", 503},
		{task.KindInternal, "internal", 500},
		// Not kinds: the safe answer is a server error.
		{"", "", 500},
		{"no_such_kind", "no_such_kind", 500},
		{"DENIED", "DENIED", 500},
	}
	seen := map[task.Kind]bool{}
	for _, tt := range tests {
		if string(tt.k) != tt.name {
			t.Errorf("kind constant %q, want %q", tt.k, tt.name)
		}
		if seen[tt.k] {
			t.Errorf("kind %q listed twice", tt.k)
		}
		seen[tt.k] = true
		if got := wire.HTTPStatus(tt.k); got != tt.want {
			t.Errorf("HTTPStatus(%q) = %d, want %d", tt.k, got, tt.want)
		}
	}
}

// The statuses of the bounded-JSON faults, end to end.
func TestFaultOfStatus(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{wire.ErrBodyTooLarge, 413},
		{wire.CheckJSON([]byte("[[[[1]]]]"), 3), 400},
		{wire.CheckJSON([]byte("{,}"), 3), 400},
	}
	for _, tt := range tests {
		if got := wire.HTTPStatus(wire.FaultOf(tt.err).Kind); got != tt.want {
			t.Errorf("HTTPStatus(FaultOf(%v)) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
