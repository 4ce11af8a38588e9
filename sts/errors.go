package sts

import (
	"fmt"
	"net/http"
)

// The error codes of the token endpoint: RFC 6749 §5.2 and RFC 8693 §2.2.2.
// They are the wire's values and never change.
const (
	CodeInvalidRequest       = "invalid_request"
	CodeInvalidClient        = "invalid_client"
	CodeInvalidGrant         = "invalid_grant"
	CodeUnauthorizedClient   = "unauthorized_client"
	CodeUnsupportedGrantType = "unsupported_grant_type"
	CodeInvalidScope         = "invalid_scope"
	CodeInvalidTarget        = "invalid_target"
	// CodeTemporarilyUnavailable (RFC 6749 §4.1.2.1, answered with 503) is
	// the STS's own trouble: a subject or actor issuer's keys cannot be
	// fetched. Nothing about the request is wrong; it may be retried.
	CodeTemporarilyUnavailable = "temporarily_unavailable"
	// CodeServerError (500) is a token the STS could not sign or encode.
	CodeServerError = "server_error"
)

// Error is a refused token request: its RFC code, the description the client
// reads (why, in a sentence that never quotes a token), and what the log gets
// besides (the verifier's own error, which may name a kid or an issuer).
type Error struct {
	Code        string
	Description string
	// Detail is for the log only.
	Detail string
	// basic: the client tried HTTP Basic, so an invalid_client answer
	// carries WWW-Authenticate (RFC 6749 §5.2).
	basic bool
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// status is the HTTP status of the answer: 401 for a client that failed to
// authenticate, 400 for everything else the request got wrong (RFC 6749
// §5.2), 5xx for the STS's own trouble.
func (e *Error) status() int {
	switch e.Code {
	case CodeInvalidClient:
		return http.StatusUnauthorized
	case CodeTemporarilyUnavailable:
		return http.StatusServiceUnavailable
	case CodeServerError:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

func refuse(code, format string, args ...any) *Error {
	return &Error{Code: code, Description: fmt.Sprintf(format, args...)}
}

// withDetail adds what the log gets besides the description.
func (e *Error) withDetail(err error) *Error {
	if err != nil {
		e.Detail = err.Error()
	}
	return e
}
