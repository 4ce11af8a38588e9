package a2a

import (
	"io"
	"net/http"
	"strings"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// Edge is the A2A adapter in the roles writ's admission core uses (see package
// adapters). The zero value serves JSON-RPC at "/". Safe for concurrent use.
type Edge struct {
	// JSONRPCPath is where the agent serves JSON-RPC (default "/").
	JSONRPCPath string
}

// Name implements adapters.Edge.
func (Edge) Name() string { return ProtocolName }

// Parse implements adapters.Edge.
func (e Edge) Parse(in wire.Inbound, lim wire.Limits) (task.Request, *task.Fault) {
	return Parse(in, Options{Limits: lim, JSONRPCPath: e.JSONRPCPath})
}

// NegotiationHeaders implements adapters.Negotiator: the version and
// extensions headers.
func (Edge) NegotiationHeaders() []string {
	return []string{VersionHeader, ExtensionsHeader, LegacyExtensionsHeader}
}

// DecisionHeaders implements adapters.Edge: the version and extensions
// headers, the content type, and a declared classification.
func (Edge) DecisionHeaders() []string {
	return []string{VersionHeader, ExtensionsHeader, LegacyExtensionsHeader, "Content-Type", wire.ClassificationHeader}
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

// CardPaths implements adapters.Cards.
func (Edge) CardPaths() []string { return []string{CardPath, LegacyCardPath} }

// ParseCard implements adapters.Cards: the card and its protocol version.
func (Edge) ParseCard(body []byte) (*task.AgentCard, string, error) {
	c, err := ParseCard(body)
	if err != nil {
		return nil, "", err
	}
	version := V03
	if strings.HasPrefix(c.ProtocolVersion, "1.") {
		version = V10
	}
	return c, version, nil
}

// RenderCard implements adapters.CardRenderer (1.0 unless version says 0.3).
func (Edge) RenderCard(c *task.AgentCard, version string) ([]byte, error) {
	if version == "" {
		version = V10
	}
	return RenderCard(c, version)
}

// CardSignatures implements adapters.SignedCards.
func (Edge) CardSignatures(body []byte) ([]wire.Signature, [][]byte, error) {
	return CardSignatures(body)
}

// SignCard implements adapters.SignedCards (1.0 unless version says 0.3, as
// RenderCard).
func (Edge) SignCard(body []byte, version string, sign wire.Signer) ([]byte, error) {
	if version == "" {
		version = V10
	}
	return SignCard(body, version, sign)
}

// StripPush implements adapters.Push.
func (Edge) StripPush(req *task.Request, body []byte) ([]byte, error) { return StripPush(req, body) }

// RenderPushResult implements adapters.Push.
func (Edge) RenderPushResult(req *task.Request, configs []task.PushConfig) wire.Rendered {
	return RenderPushResult(req, configs)
}

// RenderNotification implements adapters.Push.
func (Edge) RenderNotification(t *task.Task, version string) (string, []byte, error) {
	return RenderNotification(t, version)
}

// The headers that carry a push config's token: 0.3 and the SDKs send
// X-A2A-Notification-Token; the unprefixed name is harmless beside it.
const (
	NotificationTokenHeader       = "X-A2A-Notification-Token"
	NotificationTokenHeaderLegacy = "A2A-Notification-Token"
)

// NotificationHeaders implements adapters.Push: the token in both header
// spellings, and Authorization "<scheme> <credentials>" when both are set.
func (Edge) NotificationHeaders(p task.PushConfig) http.Header {
	h := http.Header{}
	if p.Token != "" {
		h.Set(NotificationTokenHeader, p.Token)
		h.Set(NotificationTokenHeaderLegacy, p.Token)
	}
	if p.AuthScheme != "" && p.Credentials != "" {
		h.Set("Authorization", p.AuthScheme+" "+p.Credentials)
	}
	return h
}

// GetTaskRequest implements adapters.Poller.
func (e Edge) GetTaskRequest(req *task.Request, taskID string) (string, string, []byte, *task.Request) {
	m, p, b, get := GetTaskRequest(req, taskID)
	return m, e.rpcPath(p, get), b, get
}

// SubscribeRequest implements adapters.Subscriber.
func (e Edge) SubscribeRequest(req *task.Request, taskID string) (string, string, []byte, *task.Request) {
	m, p, b, sub := SubscribeRequest(req, taskID)
	return m, e.rpcPath(p, sub), b, sub
}

// rpcPath puts writ's own JSON-RPC requests where the agent serves JSON-RPC.
func (e Edge) rpcPath(path string, r *task.Request) string {
	if r.Protocol.Binding == task.BindingJSONRPC && e.JSONRPCPath != "" {
		return e.JSONRPCPath
	}
	return path
}

// FilterTaskList implements adapters.Lister.
func (Edge) FilterTaskList(req *task.Request, body []byte, keep func(string) bool) ([]byte, bool, error) {
	return FilterTaskList(req, body, keep)
}
