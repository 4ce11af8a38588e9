package task

import "strings"

// Kind classifies why writ refuses or fails a request, independent of protocol.
// Each adapter renders a kind as its protocol's error (a JSON-RPC code, an A2A
// reason, an ACP error code); policies and logs use the kind's stable name.
type Kind string

// The fault kinds.
const (
	// KindMalformed: the body is not well-formed JSON.
	KindMalformed Kind = "malformed"
	// KindNotARequest: well-formed JSON that is not a request of the protocol.
	KindNotARequest Kind = "not_a_request"
	// KindUnknownOperation: the method or path names no operation.
	KindUnknownOperation Kind = "unknown_operation"
	// KindInvalidParams: wrong types, missing required fields, unknown enum values.
	KindInvalidParams Kind = "invalid_params"
	// KindTooLarge: the body exceeds the configured size limit.
	KindTooLarge Kind = "too_large"
	// KindTooDeep: the JSON nests deeper than the configured depth limit.
	KindTooDeep Kind = "too_deep"
	// KindVersionNotSupported: an unsupported protocol version, or a version that
	// contradicts the request's method or path style.
	KindVersionNotSupported Kind = "version_not_supported"
	// KindContentType: a content type the binding does not accept.
	KindContentType Kind = "content_type"
	// KindTaskNotFound: no such task, or one the caller may not see.
	KindTaskNotFound Kind = "task_not_found"
	// KindTaskNotCancelable: cancel of a task in a terminal state.
	KindTaskNotCancelable Kind = "task_not_cancelable"
	// KindTaskTerminal: a message to a task in a terminal state.
	KindTaskTerminal Kind = "task_terminal"
	// KindUnsupported: an operation this endpoint does not offer.
	KindUnsupported Kind = "unsupported"
	// KindPushNotSupported: push notifications are not available.
	KindPushNotSupported Kind = "push_not_supported"
	// KindExtendedCardNotConfigured: no extended card is configured.
	KindExtendedCardNotConfigured Kind = "extended_card_not_configured"
	// KindUnauthenticated: the policy denied an unauthenticated caller.
	KindUnauthenticated Kind = "unauthenticated"
	// KindDenied: the policy denied the request (see Denials).
	KindDenied Kind = "denied"
	// KindUpstreamUnavailable: the upstream agent could not be reached.
	KindUpstreamUnavailable Kind = "upstream_unavailable"
	// KindUpstreamTimeout: the upstream agent did not answer in time.
	KindUpstreamTimeout Kind = "upstream_timeout"
	// KindUpstreamInvalid: the upstream agent answered with something unparseable.
	KindUpstreamInvalid Kind = "upstream_invalid"
	// KindUnavailable: something writ needs (the lifecycle store) cannot be
	// reached; the request is refused (fail closed) and may be retried.
	KindUnavailable Kind = "unavailable"
	// KindInternal: writ itself failed.
	KindInternal Kind = "internal"
)

// Denial is one failed policy check: a stable code and a human reason.
type Denial struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// Fault is a refusal or failure, as a value. Denial is not an error in the
// decision core; a Fault is how a denial (or a parse failure) reaches an adapter's
// renderer.
type Fault struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	// Code is the upstream's own error code, when the fault was reported upstream.
	Code int `json:"code,omitempty"`
	// Denials lists every failed policy check (KindDenied, KindUnauthenticated).
	Denials []Denial `json:"denials,omitempty"`
}

// NewFault returns a fault of the given kind.
func NewFault(kind Kind, message string) *Fault {
	return &Fault{Kind: kind, Message: message}
}

func (f *Fault) Error() string {
	if len(f.Denials) == 0 {
		return string(f.Kind) + ": " + f.Message
	}
	codes := make([]string, len(f.Denials))
	for i, d := range f.Denials {
		codes[i] = d.Code
	}
	return string(f.Kind) + ": " + f.Message + " [" + strings.Join(codes, ", ") + "]"
}
