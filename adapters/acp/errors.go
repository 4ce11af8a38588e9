package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// The ACP error codes (Error.code in the spec).
const (
	CodeServerError  = "server_error"
	CodeInvalidInput = "invalid_input"
	CodeNotFound     = "not_found"
)

// codes maps every fault kind to its ACP error code. ACP has only three codes, so
// the kind itself always travels in data.kind:
//
//	kind                                   code           HTTP (wire.HTTPStatus)
//	task_not_found, unknown_operation      not_found      404
//	malformed, not_a_request,              invalid_input  400
//	invalid_params, too_deep,
//	version_not_supported,
//	task_not_cancelable, task_terminal,
//	unsupported, push_not_supported,
//	extended_card_not_configured
//	too_large                              invalid_input  413
//	content_type                           invalid_input  415
//	unauthenticated                        invalid_input  401
//	denied                                 invalid_input  403
//	upstream_unavailable, upstream_invalid server_error   502
//	upstream_timeout                       server_error   504
//	internal (and any kind not listed)     server_error   500
//
// Denials are client errors: the request as sent may not proceed. The HTTP status
// and data.kind tell them apart from malformed input.
var codes = map[task.Kind]string{
	task.KindTaskNotFound:              CodeNotFound,
	task.KindUnknownOperation:          CodeNotFound,
	task.KindMalformed:                 CodeInvalidInput,
	task.KindNotARequest:               CodeInvalidInput,
	task.KindInvalidParams:             CodeInvalidInput,
	task.KindTooLarge:                  CodeInvalidInput,
	task.KindTooDeep:                   CodeInvalidInput,
	task.KindVersionNotSupported:       CodeInvalidInput,
	task.KindContentType:               CodeInvalidInput,
	task.KindTaskNotCancelable:         CodeInvalidInput,
	task.KindTaskTerminal:              CodeInvalidInput,
	task.KindUnsupported:               CodeInvalidInput,
	task.KindPushNotSupported:          CodeInvalidInput,
	task.KindExtendedCardNotConfigured: CodeInvalidInput,
	task.KindUnauthenticated:           CodeInvalidInput,
	task.KindDenied:                    CodeInvalidInput,
	task.KindUpstreamUnavailable:       CodeServerError,
	task.KindUpstreamTimeout:           CodeServerError,
	task.KindUpstreamInvalid:           CodeServerError,
	task.KindUnavailable:               CodeServerError,
	task.KindInternal:                  CodeServerError,
}

// CodeOf is the ACP error code of a fault kind.
func CodeOf(k task.Kind) string {
	if c, ok := codes[k]; ok {
		return c
	}
	return CodeServerError
}

// Rendered is a complete HTTP answer. It is wire.Rendered, as in adapters/a2a, so
// that both adapters satisfy the same dispatch interface (adapters.Edge).
type Rendered = wire.Rendered

// wireError is the spec's Error. writ fills data with the fault kind and every
// denial; an upstream's data is free-form.
type wireError struct {
	Code    string     `json:"code"`
	Message string     `json:"message"`
	Data    *errorData `json:"data,omitempty"`
}

type errorData struct {
	Kind    task.Kind     `json:"kind"`
	Denials []task.Denial `json:"denials,omitempty"`
}

func errorOf(f *task.Fault) wireError {
	return wireError{Code: CodeOf(f.Kind), Message: f.Message, Data: &errorData{Kind: f.Kind, Denials: f.Denials}}
}

// RenderFault renders f as an ACP Error with the HTTP status of its kind. req may
// be nil or partially filled, as Parse leaves it on failure; ACP has one error
// shape, so it does not change the answer.
func RenderFault(_ *task.Request, f *task.Fault) Rendered {
	if f == nil {
		f = task.NewFault(task.KindInternal, "no fault to render")
	}
	body, _ := json.Marshal(errorOf(f))
	return Rendered{Status: wire.HTTPStatus(f.Kind), ContentType: "application/json", Body: body}
}

// RenderStreamFault renders f as one SSE ErrorEvent, for an error in the middle of
// a stream (the HTTP status has already been sent).
func RenderStreamFault(_ *task.Request, f *task.Fault) []byte {
	if f == nil {
		f = task.NewFault(task.KindInternal, "no fault to render")
	}
	body, _ := json.Marshal(struct {
		Type  string    `json:"type"`
		Error wireError `json:"error"`
	}{"error", errorOf(f)})
	return append(append([]byte("data: "), body...), "\n\n"...)
}

// upstreamError is an Error as an upstream sends it: data may be anything.
type upstreamError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// faultOf turns an upstream ACP error into a fault. status is the HTTP status of
// the answer (0 for an error event inside a stream). A writ-shaped data.kind (an
// upstream that is itself behind writ) is kept as is; otherwise the HTTP status
// decides, then the ACP code. Fault.Code carries the HTTP status.
func faultOf(req *task.Request, e upstreamError, status int) *task.Fault {
	f := &task.Fault{Message: e.Message, Code: status}
	if f.Message == "" {
		f.Message = fmt.Sprintf("upstream answered HTTP %d with ACP error %q", status, e.Code)
	}
	var d struct {
		Kind    task.Kind     `json:"kind"`
		Denials []task.Denial `json:"denials"`
	}
	if len(e.Data) > 0 && bytes.TrimSpace(e.Data)[0] == '{' && json.Unmarshal(e.Data, &d) == nil {
		f.Denials = d.Denials
		if _, known := codes[d.Kind]; known {
			f.Kind = d.Kind
			return f
		}
	}
	f.Kind = kindOf(req, e.Code, status)
	return f
}

// kindOf maps an upstream's HTTP status and ACP code to a fault kind. The ACP
// reference server answers 403 for state conflicts (cancel of a terminal run,
// resume of a run that awaits nothing), so 403 on a cancel is not-cancelable.
// not_found on /agents routes means no such agent: the path names nothing, which
// is what unknown_operation says; on run and session routes it is task_not_found.
func kindOf(req *task.Request, code string, status int) task.Kind {
	agentRoute := req.Operation == task.OpCard || req.Operation == task.OpDiscover
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return task.KindInvalidParams
	case http.StatusUnauthorized:
		return task.KindUnauthenticated
	case http.StatusForbidden:
		if req.Operation == task.OpCancel {
			return task.KindTaskNotCancelable
		}
		return task.KindDenied
	case http.StatusNotFound:
		if agentRoute {
			return task.KindUnknownOperation
		}
		return task.KindTaskNotFound
	case http.StatusRequestEntityTooLarge:
		return task.KindTooLarge
	case http.StatusUnsupportedMediaType:
		return task.KindContentType
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return task.KindUpstreamUnavailable
	case http.StatusGatewayTimeout:
		return task.KindUpstreamTimeout
	}
	switch code {
	case CodeNotFound:
		if agentRoute {
			return task.KindUnknownOperation
		}
		return task.KindTaskNotFound
	case CodeInvalidInput:
		return task.KindInvalidParams
	}
	return task.KindInternal
}
