package acp

import (
	"io"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// AgentsPath is ACP's agent listing, which writ answers itself with the agents
// a caller may see.
const AgentsPath = "/agents"

// Resources are the first path segments of ACP's resources (runs, the agent
// listing, sessions in both spellings): what tells an ACP request on a route
// that detects its protocol per request from an A2A one.
func Resources() []string { return []string{"runs", "agents", "sessions", "session"} }

// Edge is the ACP adapter in the roles writ's admission core uses (see package
// adapters). ACP has no push notifications and no subscription to a running
// run, so Edge plays neither role; an ACP agent's manifest is forwarded, not
// rewritten. Safe for concurrent use.
type Edge struct{}

// Name implements adapters.Edge.
func (Edge) Name() string { return ProtocolName }

// Parse implements adapters.Edge.
func (Edge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return Parse(in, Options{Limits: lim})
}

// DecisionHeaders implements adapters.Edge: the content type and a declared
// classification.
func (Edge) DecisionHeaders() []string {
	return []string{"Content-Type", wire.ClassificationHeader}
}

// RenderFault implements adapters.Edge.
func (Edge) RenderFault(req *task.Request, f *task.Fault) wire.Rendered { return RenderFault(req, f) }

// ParseResponse implements adapters.Answers.
func (Edge) ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error) {
	return ParseResponse(req, status, body)
}

// NewStreamReader implements adapters.Answers.
func (Edge) NewStreamReader(req *task.Request, body io.Reader, maxEventBytes int) wire.EventReader {
	return NewStreamReader(req, body, maxEventBytes)
}

// RenderStreamFault implements adapters.Answers.
func (Edge) RenderStreamFault(req *task.Request, f *task.Fault) []byte {
	return RenderStreamFault(req, f)
}

// RenderCard implements adapters.CardRenderer: the card as an agent manifest.
func (Edge) RenderCard(c *task.AgentCard, _ string) ([]byte, error) { return RenderManifest(c) }

// GetTaskRequest implements adapters.Poller: GET /runs/{id}.
func (Edge) GetTaskRequest(req *task.Request, runID string) (string, string, []byte, *task.Request) {
	return GetRunRequest(req, runID)
}

// ReadyPath implements adapters.Prober: the agent listing.
func (Edge) ReadyPath() string { return AgentsPath }
