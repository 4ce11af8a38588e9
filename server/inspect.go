package server

import (
	"encoding/json"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// InspectResult is what a policy would see of one request: the internal
// request, for a request writ accepts, or the fault and the exact answer
// writ would send. It is what `writ inspect` prints.
type InspectResult struct {
	Request *task.Request  `json:"request,omitempty"`
	Fault   *task.Fault    `json:"fault,omitempty"`
	Answer  *InspectAnswer `json:"answer,omitempty"`
}

// InspectAnswer is the protocol error writ would answer a refused request
// with.
type InspectAnswer struct {
	Status      int             `json:"status"`
	ContentType string          `json:"content_type"`
	Body        json.RawMessage `json:"body"`
}

// Inspect reads in as an agent of protocol (names.Auto: by the path) on
// route "/" reads it, within lim: the internal request, or the fault and
// the answer the protocol's adapter renders for it. An error means the
// protocol is unknown.
func Inspect(in wire.Inbound, protocol string, lim wire.Limits) (*InspectResult, error) {
	edges, err := adapters.NewRoute(protocol, "/")
	if err != nil {
		return nil, err
	}
	edge := edges.For(in.Path)
	req, fault := edge.Parse(in, lim)
	if fault == nil {
		return &InspectResult{Request: &req}, nil
	}
	r := edge.RenderFault(&req, fault)
	return &InspectResult{Fault: fault, Answer: &InspectAnswer{Status: r.Status, ContentType: r.ContentType, Body: r.Body}}, nil
}
