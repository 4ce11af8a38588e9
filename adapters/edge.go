// Package adapters is writ's protocol table: the roles a protocol edge plays
// for the admission core, the Protocol value each protocol registers, and the
// edge of a request, picked by iterating the table. The edges themselves are
// adapters/a2a.Edge and adapters/acp.Edge; everything protocol-specific lives
// in those packages and in their entries of the table (builtin.go), so the
// core, the configuration and the doors never name a protocol or its
// vocabulary.
//
// Every edge parses requests and renders faults (Edge). The other roles are
// optional and found by type assertion: an edge that cannot play a role (ACP
// has no push notifications) simply does not implement it.
package adapters

import (
	"io"
	"net/http"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// Edge parses one protocol's requests and renders its faults. Implementations
// are safe for concurrent use.
type Edge interface {
	// Name is the protocol name carried in task.Protocol.Name.
	Name() string
	// Parse turns a request into the internal request, or a fault (with whatever
	// of the request was readable, for rendering).
	Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault)
	// RenderFault renders a fault in the protocol shape of the request.
	RenderFault(req *task.Request, f *task.Fault) wire.Rendered
	// DecisionHeaders names every request header Parse reads (the version,
	// the extensions, the content type, a declared classification): what the
	// decision about the request depends on. The core refuses a request
	// whose Connection header names one of them, since forwarding would drop
	// it (hop-by-hop) and the agent would not see what writ decided on.
	DecisionHeaders() []string
}

// Answers reads an upstream's answers into lifecycle events.
type Answers interface {
	// ParseResponse turns a whole upstream answer to req into lifecycle events.
	ParseResponse(req *task.Request, status int, body []byte) ([]task.Event, error)
	// NewStreamReader reads an upstream SSE answer to req event by event.
	NewStreamReader(req *task.Request, body io.Reader, maxEventBytes int) wire.EventReader
	// RenderStreamFault renders a fault as one SSE event, for errors mid-stream.
	RenderStreamFault(req *task.Request, f *task.Fault) []byte
}

// CardRenderer renders a card in the protocol's shape (for ACP: a manifest),
// for writ's directory.
type CardRenderer interface {
	RenderCard(c *task.AgentCard, version string) ([]byte, error)
}

// Cards is a protocol whose agents publish a card that writ fetches, rewrites
// and serves itself.
type Cards interface {
	CardRenderer
	// CardPaths are where the protocol's agents publish their card, in the
	// order to try them.
	CardPaths() []string
	// ParseCard reads an agent's card and says in which protocol version.
	ParseCard(body []byte) (card *task.AgentCard, version string, err error)
}

// SignedCards is a protocol whose cards carry signatures over their
// content: writ checks an agent's card before it reads it, and signs every
// card it renders (the agent's signature does not survive writ's rewrite).
// The keys and the cryptography are the core's; the edge knows where a card
// keeps its signatures and what content they cover.
type SignedCards interface {
	// CardSignatures reads a fetched card: its signatures (none: unsigned)
	// and the contents a signature may cover, in the order to try them.
	// Each content is itself a card: the one to read, in place of body,
	// once a signature verifies over it.
	CardSignatures(body []byte) (sigs []wire.Signature, contents [][]byte, err error)
	// SignCard signs a card RenderCard rendered in version and returns the
	// bytes to serve, whose content (as a verifier computes it) is exactly
	// what sign signed.
	SignCard(body []byte, version string, sign wire.Signer) ([]byte, error)
}

// ExtendedCards is a protocol whose agents serve a richer card to
// authenticated callers, which writ checks, rewrites and signs in the
// agent's answer as it does the public card (rw).
type ExtendedCards interface {
	RewriteCardAnswer(req *task.Request, status int, body []byte, rw wire.CardRewrite) ([]byte, error)
}

// Push is a protocol with push notifications, which writ keeps and delivers
// itself.
type Push interface {
	// StripPush removes a send's push config from the body forwarded upstream.
	StripPush(req *task.Request, body []byte) ([]byte, error)
	// RenderPushResult answers a push-config operation writ served itself.
	RenderPushResult(req *task.Request, configs []task.PushConfig) wire.Rendered
	// RenderNotification renders a task's state change for a push callback, in
	// the protocol version the task was created with.
	RenderNotification(t *task.Task, version string) (contentType string, body []byte, err error)
	// NotificationHeaders are the headers a notification to p carries (its
	// token, its credentials).
	NotificationHeaders(p task.PushConfig) http.Header
}

// Poller asks an agent for a task's current state (to follow a task after its
// request returned).
type Poller interface {
	// GetTaskRequest renders a request for the task, shaped like req; get is
	// the internal request it stands for (to parse the answer with).
	GetTaskRequest(req *task.Request, taskID string) (method, path string, body []byte, get *task.Request)
}

// Negotiator names the request headers that negotiate the protocol (version,
// extensions): a follower resumed after a restart sends them again. Never
// credentials.
type Negotiator interface {
	NegotiationHeaders() []string
}

// Subscriber subscribes to a running task's events.
type Subscriber interface {
	// SubscribeRequest renders a subscription to the task, shaped like req.
	SubscribeRequest(req *task.Request, taskID string) (method, path string, body []byte, sub *task.Request)
}

// Lister filters task listings.
type Lister interface {
	// FilterTaskList removes from a list answer the tasks keep refuses, and
	// reports whether it removed any.
	FilterTaskList(req *task.Request, body []byte, keep func(taskID string) bool) ([]byte, bool, error)
}

// Prober names what readiness asks an agent for when its protocol has no card.
type Prober interface {
	ReadyPath() string
}

// Canonical is a protocol whose requests writ forwards in its own encoding
// of what it read, never in the caller's bytes (protobuf: a field sent
// twice, a padded varint, fields out of order all encode one message many
// ways, which the agent's parser might read otherwise than writ's).
type Canonical interface {
	// CanonicalBody re-encodes the body of req, which Parse read.
	CanonicalBody(req *task.Request, body []byte) ([]byte, error)
}
