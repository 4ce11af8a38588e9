package a2a

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// JSON-RPC and A2A error codes.
const (
	CodeParseError            = -32700
	CodeInvalidRequest        = -32600
	CodeMethodNotFound        = -32601
	CodeInvalidParams         = -32602
	CodeInternal              = -32603
	CodeTaskNotFound          = -32001
	CodeTaskNotCancelable     = -32002
	CodePushNotSupported      = -32003
	CodeUnsupportedOperation  = -32004
	CodeContentTypeNotSupport = -32005
	CodeInvalidAgentResponse  = -32006
	CodeExtendedCardNotConfig = -32007
	CodeVersionNotSupported   = -32009
	// CodeDenied is writ's own code for a policy denial: A2A defines none, so writ
	// uses the JSON-RPC server-error range and lists every denial in error.data.
	CodeDenied = -32000
)

// Error domains of ErrorInfo details.
const (
	A2ADomain  = "a2a-protocol.org"
	WritDomain = "writ"
	errorInfo  = "type.googleapis.com/google.rpc.ErrorInfo"
)

// faultShape is how one fault kind looks in A2A.
type faultShape struct {
	code       int    // JSON-RPC code
	reason     string // ErrorInfo reason
	domain     string
	restStatus string // google.rpc.Code name for HTTP+JSON errors
}

var shapes = map[task.Kind]faultShape{
	task.KindMalformed:                 {CodeParseError, "PARSE_ERROR", WritDomain, "INVALID_ARGUMENT"},
	task.KindNotARequest:               {CodeInvalidRequest, "INVALID_REQUEST", WritDomain, "INVALID_ARGUMENT"},
	task.KindUnknownOperation:          {CodeMethodNotFound, "METHOD_NOT_FOUND", WritDomain, "NOT_FOUND"},
	task.KindInvalidParams:             {CodeInvalidParams, "INVALID_PARAMS", A2ADomain, "INVALID_ARGUMENT"},
	task.KindTooLarge:                  {CodeInvalidRequest, "PAYLOAD_TOO_LARGE", WritDomain, "RESOURCE_EXHAUSTED"},
	task.KindTooDeep:                   {CodeInvalidRequest, "JSON_TOO_DEEP", WritDomain, "INVALID_ARGUMENT"},
	task.KindVersionNotSupported:       {CodeVersionNotSupported, "VERSION_NOT_SUPPORTED", A2ADomain, "FAILED_PRECONDITION"},
	task.KindContentType:               {CodeContentTypeNotSupport, "CONTENT_TYPE_NOT_SUPPORTED", A2ADomain, "INVALID_ARGUMENT"},
	task.KindTaskNotFound:              {CodeTaskNotFound, "TASK_NOT_FOUND", A2ADomain, "NOT_FOUND"},
	task.KindTaskNotCancelable:         {CodeTaskNotCancelable, "TASK_NOT_CANCELABLE", A2ADomain, "FAILED_PRECONDITION"},
	task.KindTaskTerminal:              {CodeUnsupportedOperation, "UNSUPPORTED_OPERATION", A2ADomain, "FAILED_PRECONDITION"},
	task.KindUnsupported:               {CodeUnsupportedOperation, "UNSUPPORTED_OPERATION", A2ADomain, "FAILED_PRECONDITION"},
	task.KindPushNotSupported:          {CodePushNotSupported, "PUSH_NOTIFICATION_NOT_SUPPORTED", A2ADomain, "FAILED_PRECONDITION"},
	task.KindExtendedCardNotConfigured: {CodeExtendedCardNotConfig, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", A2ADomain, "FAILED_PRECONDITION"},
	task.KindUnauthenticated:           {CodeDenied, "UNAUTHENTICATED", WritDomain, "UNAUTHENTICATED"},
	task.KindDenied:                    {CodeDenied, "PERMISSION_DENIED", WritDomain, "PERMISSION_DENIED"},
	task.KindUpstreamUnavailable:       {CodeInternal, "UPSTREAM_UNAVAILABLE", WritDomain, "UNAVAILABLE"},
	task.KindUpstreamTimeout:           {CodeInternal, "UPSTREAM_TIMEOUT", WritDomain, "DEADLINE_EXCEEDED"},
	task.KindUpstreamInvalid:           {CodeInvalidAgentResponse, "INVALID_AGENT_RESPONSE", A2ADomain, "INTERNAL"},
	task.KindUnavailable:               {CodeInternal, "UNAVAILABLE", WritDomain, "UNAVAILABLE"},
	task.KindInternal:                  {CodeInternal, "INTERNAL_ERROR", WritDomain, "INTERNAL"},
}

func shapeOf(k task.Kind) faultShape {
	if s, ok := shapes[k]; ok {
		return s
	}
	return shapes[task.KindInternal]
}

// CodeOf is the JSON-RPC error code of a fault kind.
func CodeOf(k task.Kind) int { return shapeOf(k).code }

// ErrorDetail is one google.rpc.ErrorInfo entry of an error's details.
type ErrorDetail struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// TerminalReason marks an UnsupportedOperation that refused a message to a task
// in a terminal state.
const TerminalReason = "TASK_TERMINAL"

// details lists the fault's own reason first (an A2A reason where A2A has one, so
// SDK clients map it to their typed error), writ's finer reason next where it has
// one, then one entry per denial. A denial that names the reason already listed
// (UNAUTHENTICATED, the 401's own reason and its one denial) is not listed
// again: its neutral reason joins that entry, so each reason appears once.
func details(f *task.Fault) []ErrorDetail {
	s := shapeOf(f.Kind)
	out := []ErrorDetail{{Type: errorInfo, Reason: s.reason, Domain: s.domain}}
	if f.Kind == task.KindTaskTerminal {
		out = append(out, ErrorDetail{Type: errorInfo, Reason: TerminalReason, Domain: WritDomain})
	}
	for _, d := range f.Denials {
		if i := slices.IndexFunc(out, func(e ErrorDetail) bool { return e.Reason == d.Code && e.Domain == WritDomain }); i >= 0 {
			if out[i].Metadata == nil {
				out[i].Metadata = map[string]string{"reason": d.Reason}
			}
			continue
		}
		out = append(out, ErrorDetail{Type: errorInfo, Reason: d.Code, Domain: WritDomain,
			Metadata: map[string]string{"reason": d.Reason}})
	}
	return out
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// legacyData is error.data for A2A 0.3: an object, as 0.3 clients (a2a-go
// decodes it into a map) expect. It holds the same facts as the 1.0 details.
type legacyData struct {
	Reason  string        `json:"reason"`
	Domain  string        `json:"domain"`
	Denials []task.Denial `json:"denials,omitempty"`
	Details []ErrorDetail `json:"details"`
}

// errorData is error.data in the request's version: 1.0 a list of ErrorInfo,
// 0.3 an object.
func errorData(req *task.Request, f *task.Fault) any {
	d := details(f)
	if req.Protocol.Version == V10 {
		return d
	}
	return legacyData{Reason: d[0].Reason, Domain: d[0].Domain, Denials: f.Denials, Details: d}
}

type rpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcError        `json:"error"`
}

type restError struct {
	Error restErrorBody `json:"error"`
}

type restErrorBody struct {
	Code    int           `json:"code"`
	Status  string        `json:"status"`
	Message string        `json:"message"`
	Details []ErrorDetail `json:"details"`
}

// jsonrpcHTTPStatus: JSON-RPC errors travel in 200 responses, as A2A servers send
// them, except where the HTTP status itself carries meaning for intermediaries
// (authentication, authorization, size, upstream failures).
func jsonrpcHTTPStatus(k task.Kind) int {
	switch k {
	case task.KindUnauthenticated, task.KindDenied, task.KindTooLarge,
		task.KindUpstreamUnavailable, task.KindUpstreamTimeout, task.KindUnavailable:
		return wire.HTTPStatus(k)
	}
	return http.StatusOK
}

// RenderFault renders f in the protocol shape of req (its version, binding and
// JSON-RPC id). req may be partially filled, as Parse leaves it on failure.
func RenderFault(req *task.Request, f *task.Fault) wire.Rendered {
	if req.Protocol.Binding == task.BindingJSONRPC {
		id := req.Correlation
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		body, _ := json.Marshal(rpcErrorResponse{JSONRPC: "2.0", ID: id,
			Error: rpcError{Code: CodeOf(f.Kind), Message: f.Message, Data: errorData(req, f)}})
		return wire.Rendered{Status: jsonrpcHTTPStatus(f.Kind), ContentType: "application/json", Body: body}
	}
	status := wire.HTTPStatus(f.Kind)
	if req.Protocol.Version == V03 {
		body, _ := json.Marshal(rpcError{Code: CodeOf(f.Kind), Message: f.Message, Data: errorData(req, f)})
		return wire.Rendered{Status: status, ContentType: "application/json", Body: body}
	}
	body, _ := json.Marshal(restError{Error: restErrorBody{Code: status, Status: shapeOf(f.Kind).restStatus,
		Message: f.Message, Details: details(f)}})
	return wire.Rendered{Status: status, ContentType: "application/a2a+json", Body: body}
}

// RenderStreamFault renders f as one SSE event, for an error in the middle of a
// stream (the HTTP status has already been sent).
func RenderStreamFault(req *task.Request, f *task.Fault) []byte {
	r := RenderFault(req, f)
	prefix := "data: "
	if req.Protocol.Binding == task.BindingREST {
		prefix = "event: error\ndata: "
	}
	return append(append([]byte(prefix), r.Body...), "\n\n"...)
}
