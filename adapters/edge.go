// Package adapters chooses the edge adapter for a request: A2A (adapters/a2a) or
// ACP (adapters/acp). Everything protocol-specific lives in those packages; this
// one only dispatches, so callers outside adapters/ never name a protocol's types.
package adapters

import (
	"fmt"
	"strings"

	"github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/adapters/acp"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// Edge is one protocol's adapter, as the sidecar, Envoy mode and the CLI use it.
// Implementations are stateless and safe for concurrent use.
type Edge interface {
	// Name is the protocol name carried in task.Protocol.Name.
	Name() string
	// Parse turns a request into the internal request, or a fault (with whatever
	// of the request was readable, for rendering).
	Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault)
	// RenderFault renders a fault in the protocol shape of the request.
	RenderFault(req *task.Request, f *task.Fault) wire.Rendered
}

type a2aEdge struct{}

func (a2aEdge) Name() string { return a2a.ProtocolName }
func (a2aEdge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return a2a.Parse(in, a2a.Options{Limits: lim})
}
func (a2aEdge) RenderFault(req *task.Request, f *task.Fault) wire.Rendered {
	return a2a.RenderFault(req, f)
}

type acpEdge struct{}

func (acpEdge) Name() string { return acp.ProtocolName }
func (acpEdge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return acp.Parse(in, acp.Options{Limits: lim})
}
func (acpEdge) RenderFault(req *task.Request, f *task.Fault) wire.Rendered {
	return acp.RenderFault(req, f)
}

var edges = map[string]Edge{a2a.ProtocolName: a2aEdge{}, acp.ProtocolName: acpEdge{}}

// Select returns the adapter for a configured protocol: "a2a", "acp", or "auto",
// which picks ACP for its resource paths (/runs, /agents, /session(s)) and A2A for
// everything else.
func Select(protocol, path string) (Edge, error) {
	if protocol == "auto" || protocol == "" {
		protocol = Detect(path)
	}
	e, ok := edges[protocol]
	if !ok {
		return nil, fmt.Errorf("unknown protocol %q (want a2a, acp or auto)", protocol)
	}
	return e, nil
}

// Detect names the protocol a path belongs to.
func Detect(path string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	switch first {
	case "runs", "agents", "sessions", "session":
		return acp.ProtocolName
	}
	return a2a.ProtocolName
}
