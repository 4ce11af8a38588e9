// Package adapters chooses the edge adapter for a request: A2A (adapters/a2a) or
// ACP (adapters/acp). Everything protocol-specific lives in those packages; this
// one only dispatches, so callers outside adapters/ never name a protocol's types.
package adapters

import (
	"fmt"
	"io"
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
	// RenderStreamFault renders a fault as one SSE event, for errors mid-stream.
	RenderStreamFault(req *task.Request, f *task.Fault) []byte
	// ParseResponse turns a whole upstream answer to req into lifecycle events.
	ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error)
	// NewStreamReader reads an upstream SSE answer to req event by event.
	NewStreamReader(req *task.Request, body io.Reader, maxEventBytes int) StreamReader
	// StripPush removes a send's push config from the body forwarded upstream
	// (writ keeps and delivers push notifications itself).
	StripPush(req *task.Request, body []byte) ([]byte, error)
	// RenderPushResult answers a push-config operation writ served itself.
	RenderPushResult(req *task.Request, configs []task.PushConfig) wire.Rendered
	// RenderNotification renders a task's state change for a push callback, in
	// the protocol version the task was created with.
	RenderNotification(t *task.Task, version string) (contentType string, body []byte, err error)
	// GetTaskRequest renders a request asking the upstream for a task's current
	// state (to follow a task after its request returned), shaped like req.
	GetTaskRequest(req *task.Request, taskID string) (method, path string, body []byte, get *task.Request)
	// SubscribeRequest renders a request subscribing to a task's events, shaped
	// like req; ok is false for a protocol that cannot subscribe.
	SubscribeRequest(req *task.Request, taskID string) (method, path string, body []byte, sub *task.Request, ok bool)
	// CardPaths are where the protocol's agents publish the card writ fetches,
	// rewrites and serves itself (none: writ forwards card requests).
	CardPaths() []string
	// ParseCard reads an agent's card and says in which protocol version.
	ParseCard(body []byte) (card *task.AgentCard, version string, err error)
	// RenderCard renders a card in the protocol's shape (for ACP: a manifest).
	RenderCard(c *task.AgentCard, version string) ([]byte, error)
	// ReadyPath is what readiness asks the agent for when it has no card.
	ReadyPath() string
	// FilterTaskList removes from a list answer the tasks keep refuses, and
	// reports whether it removed any.
	FilterTaskList(req *task.Request, body []byte, keep func(taskID string) bool) ([]byte, bool, error)
}

// StreamReader yields an upstream stream's SSE blocks (Raw: the exact bytes to pass
// on) with the lifecycle events each carries. A block that is not a valid event is
// returned with a non-nil error and its Raw set; the stream may go on. An error with
// an empty Raw is a read error that ends the stream (io.EOF at its end).
type StreamReader interface {
	Next() (wire.SSEEvent, []task.Event, error)
}

type a2aEdge struct{}

func (a2aEdge) Name() string { return a2a.ProtocolName }
func (a2aEdge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return a2a.Parse(in, a2a.Options{Limits: lim})
}
func (a2aEdge) RenderFault(req *task.Request, f *task.Fault) wire.Rendered {
	return a2a.RenderFault(req, f)
}
func (a2aEdge) RenderStreamFault(req *task.Request, f *task.Fault) []byte {
	return a2a.RenderStreamFault(req, f)
}
func (a2aEdge) ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error) {
	return a2a.ParseResponse(req, status, body)
}
func (a2aEdge) NewStreamReader(req *task.Request, body io.Reader, max int) StreamReader {
	return a2a.NewStreamReader(req, body, max)
}
func (a2aEdge) StripPush(req *task.Request, body []byte) ([]byte, error) {
	return a2a.StripPush(req, body)
}
func (a2aEdge) RenderPushResult(req *task.Request, configs []task.PushConfig) wire.Rendered {
	return a2a.RenderPushResult(req, configs)
}
func (a2aEdge) RenderNotification(t *task.Task, version string) (string, []byte, error) {
	return a2a.RenderNotification(t, version)
}
func (a2aEdge) GetTaskRequest(req *task.Request, taskID string) (string, string, []byte, *task.Request) {
	return a2a.GetTaskRequest(req, taskID)
}
func (a2aEdge) CardPaths() []string { return []string{a2a.CardPath, a2a.LegacyCardPath} }
func (a2aEdge) ParseCard(body []byte) (*task.AgentCard, string, error) {
	c, err := a2a.ParseCard(body)
	if err != nil {
		return nil, "", err
	}
	version := a2a.V03
	if strings.HasPrefix(c.ProtocolVersion, "1.") {
		version = a2a.V10
	}
	return c, version, nil
}
func (a2aEdge) RenderCard(c *task.AgentCard, version string) ([]byte, error) {
	if version == "" {
		version = a2a.V10
	}
	return a2a.RenderCard(c, version)
}
func (a2aEdge) ReadyPath() string { return a2a.CardPath }
func (a2aEdge) FilterTaskList(req *task.Request, body []byte, keep func(string) bool) ([]byte, bool, error) {
	return a2a.FilterTaskList(req, body, keep)
}
func (a2aEdge) SubscribeRequest(req *task.Request, taskID string) (string, string, []byte, *task.Request, bool) {
	m, p, b, sub := a2a.SubscribeRequest(req, taskID)
	return m, p, b, sub, true
}

type acpEdge struct{}

func (acpEdge) Name() string { return acp.ProtocolName }
func (acpEdge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return acp.Parse(in, acp.Options{Limits: lim})
}
func (acpEdge) RenderFault(req *task.Request, f *task.Fault) wire.Rendered {
	return acp.RenderFault(req, f)
}
func (acpEdge) RenderStreamFault(req *task.Request, f *task.Fault) []byte {
	return acp.RenderStreamFault(req, f)
}
func (acpEdge) ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error) {
	return acp.ParseResponse(req, status, body)
}
func (acpEdge) NewStreamReader(req *task.Request, body io.Reader, max int) StreamReader {
	return acp.NewStreamReader(req, body, max)
}

// ACP has no push notifications: a run's body carries no callback to strip, and
// push-config operations do not exist (writ never routes one to this adapter).
func (acpEdge) StripPush(_ *task.Request, body []byte) ([]byte, error) { return body, nil }
func (acpEdge) RenderPushResult(req *task.Request, _ []task.PushConfig) wire.Rendered {
	return acp.RenderFault(req, task.NewFault(task.KindPushNotSupported, "ACP has no push notifications"))
}
func (acpEdge) RenderNotification(*task.Task, string) (string, []byte, error) {
	return "", nil, fmt.Errorf("ACP has no push notifications")
}
func (acpEdge) GetTaskRequest(req *task.Request, runID string) (string, string, []byte, *task.Request) {
	return acp.GetRunRequest(req, runID)
}

// An ACP agent's manifest is forwarded, not rewritten; readiness asks for the
// agent listing.
func (acpEdge) CardPaths() []string { return nil }
func (acpEdge) ParseCard(body []byte) (*task.AgentCard, string, error) {
	c, err := acp.ParseManifest(body)
	return c, acp.Version, err
}
func (acpEdge) RenderCard(c *task.AgentCard, _ string) ([]byte, error) { return acp.RenderManifest(c) }
func (acpEdge) ReadyPath() string                                      { return "/agents" }

// An ACP session lists runs the agent scoped to the session; writ passes the
// answer on (the policy decides who may read the session).
func (acpEdge) FilterTaskList(_ *task.Request, body []byte, _ func(string) bool) ([]byte, bool, error) {
	return body, false, nil
}

// ACP has no subscription to a run that is already going: writ polls.
func (acpEdge) SubscribeRequest(*task.Request, string) (string, string, []byte, *task.Request, bool) {
	return "", "", nil, nil, false
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
