package wire

import (
	"errors"
	"net/http"

	"github.com/writ-authz/writ/task"
)

// HTTPStatus is the HTTP status writ answers with for a fault of the given kind,
// whatever the protocol (JSON-RPC errors too: writ's denials are visible to HTTP
// intermediaries and to Envoy).
func HTTPStatus(k task.Kind) int {
	switch k {
	case task.KindMalformed, task.KindNotARequest, task.KindInvalidParams,
		task.KindVersionNotSupported, task.KindTaskNotCancelable, task.KindTaskTerminal,
		task.KindUnsupported, task.KindPushNotSupported, task.KindExtendedCardNotConfigured,
		task.KindTooDeep:
		return http.StatusBadRequest
	case task.KindUnknownOperation, task.KindTaskNotFound:
		return http.StatusNotFound
	case task.KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case task.KindContentType:
		return http.StatusUnsupportedMediaType
	case task.KindUnauthenticated:
		return http.StatusUnauthorized
	case task.KindDenied:
		return http.StatusForbidden
	case task.KindUpstreamUnavailable, task.KindUpstreamInvalid:
		return http.StatusBadGateway
	case task.KindUpstreamTimeout:
		return http.StatusGatewayTimeout
	case task.KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// FaultOf turns a bounded-JSON error into the matching fault.
func FaultOf(err error) *task.Fault {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrBodyTooLarge):
		return task.NewFault(task.KindTooLarge, err.Error())
	case errors.Is(err, ErrTooDeep):
		return task.NewFault(task.KindTooDeep, err.Error())
	case errors.Is(err, ErrAmbiguousEnvelope):
		// The request object itself is ambiguous: not a valid request (-32600).
		return task.NewFault(task.KindNotARequest, err.Error())
	case errors.Is(err, ErrDuplicateKey):
		// Below the request object (params, a REST or ACP body): invalid params.
		return task.NewFault(task.KindInvalidParams, err.Error())
	case errors.Is(err, ErrMalformed):
		return task.NewFault(task.KindMalformed, err.Error())
	}
	return task.NewFault(task.KindInternal, err.Error())
}
