package exchange

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// Sentinel errors. Every error Exchange returns wraps one of the first
// group; the STS-answer refinements also wrap ErrSTSInvalidAnswer and the
// timeout also wraps ErrSTSUnavailable, so a caller can map either the kind
// or the detail. Their texts never hold a token.
var (
	// ErrSTSUnavailable: the STS (or its discovery document or JWKS) cannot
	// be reached, or answered 5xx.
	ErrSTSUnavailable = errors.New("exchange: the STS is unavailable")
	// ErrSTSRefused: the STS refused the exchange; errors.As to *RefusedError
	// gives its RFC 6749 code and description.
	ErrSTSRefused = errors.New("exchange: the STS refused the exchange")
	// ErrSTSInvalidAnswer: the STS answered what is not a token response, or
	// a token that does not verify.
	ErrSTSInvalidAnswer = errors.New("exchange: the STS's answer is not valid")
	// ErrActorCredential: this agent's own credential (the actor token file,
	// the client secret file) cannot be read or is not usable.
	ErrActorCredential = errors.New("exchange: the actor credential is not usable")
	// ErrInvalidRequest: the request cannot be exchanged as it is (no
	// subject token, no audience, no scope).
	ErrInvalidRequest = errors.New("exchange: invalid request")
)

// Refinements.
var (
	// ErrSTSTimeout: the STS did not answer within the timeout (also
	// ErrSTSUnavailable).
	ErrSTSTimeout = errors.New("the STS did not answer in time")
	// ErrWrongAudience: the returned token is not for the audience asked
	// for (also ErrSTSInvalidAnswer).
	ErrWrongAudience = errors.New("the token is for another audience")
	// ErrWrongIssuer: the returned token is not from the configured STS
	// issuer (also ErrSTSInvalidAnswer).
	ErrWrongIssuer = errors.New("the token is from another issuer")
	// ErrExpired: the returned token has expired or is not valid yet (also
	// ErrSTSInvalidAnswer).
	ErrExpired = errors.New("the token has expired")
	// ErrBadSignature: the returned token's signature does not verify with
	// the STS's published keys (also ErrSTSInvalidAnswer).
	ErrBadSignature = errors.New("the token's signature does not verify with the STS's keys")
	// ErrScopeWidened: the returned token has scope the request did not ask
	// for (also ErrSTSInvalidAnswer).
	ErrScopeWidened = errors.New("the token has scope beyond the request's")
)

// RefusedError is an STS's refusal: RFC 6749 §5.2's error code and
// description. It matches ErrSTSRefused with errors.Is.
type RefusedError struct {
	Code        string
	Description string
	// Status is the HTTP status the STS answered with.
	Status int
}

func (e *RefusedError) Error() string {
	if e.Description == "" {
		return fmt.Sprintf("%v: %s", ErrSTSRefused, e.Code)
	}
	return fmt.Sprintf("%v: %s: %s", ErrSTSRefused, e.Code, e.Description)
}

// Is makes a RefusedError match ErrSTSRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrSTSRefused }

// unavailable wraps a failure to reach the STS: a timeout (the client's or
// the context's) as ErrSTSTimeout too.
func unavailable(what string, err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w: %s", ErrSTSUnavailable, ErrSTSTimeout, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrSTSUnavailable, what, err)
}

// invalid wraps an answer writ refuses, with its refinement when there is one.
func invalid(refinement error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if refinement == nil {
		return fmt.Errorf("%w: %s", ErrSTSInvalidAnswer, msg)
	}
	return fmt.Errorf("%w: %w: %s", ErrSTSInvalidAnswer, refinement, msg)
}

// Kind is the short, stable name of err for events and metrics (events.Exchange.Error).
func Kind(err error) string {
	var ref *RefusedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ref):
		// The code comes from the STS: only the registered ones become a
		// label, so a confused STS cannot grow a metric without bound.
		switch ref.Code {
		case "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
			"unsupported_grant_type", "invalid_scope", "invalid_target":
			return "refused:" + ref.Code
		}
		return "refused:other"
	case errors.Is(err, ErrSTSTimeout):
		return "timeout"
	case errors.Is(err, ErrSTSUnavailable):
		return "unavailable"
	case errors.Is(err, ErrWrongAudience):
		return "wrong_audience"
	case errors.Is(err, ErrWrongIssuer):
		return "wrong_issuer"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrBadSignature):
		return "bad_signature"
	case errors.Is(err, ErrScopeWidened):
		return "scope_widened"
	case errors.Is(err, ErrSTSInvalidAnswer):
		return "invalid_answer"
	case errors.Is(err, ErrActorCredential):
		return "actor_credential"
	case errors.Is(err, ErrInvalidRequest):
		return "invalid_request"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}
