package task

import (
	"encoding/json"
)

// Operation is what a request asks for, in writ's vocabulary. Policies match on it.
type Operation string

// The operations (their facts are in Operations). Send with a TaskID
// continues an existing task (a reply).
const (
	OpSend         Operation = "send"
	OpStream       Operation = "stream"
	OpGet          Operation = "get"
	OpList         Operation = "list"
	OpCancel       Operation = "cancel"
	OpSubscribe    Operation = "subscribe"
	OpPushSet      Operation = "push_config.set"
	OpPushGet      Operation = "push_config.get"
	OpPushList     Operation = "push_config.list"
	OpPushDelete   Operation = "push_config.delete"
	OpCard         Operation = "card"
	OpExtendedCard Operation = "card.extended"
	OpDiscover     Operation = "discover"
)

// Binding names the transport shape of a request.
type Binding string

// Bindings.
const (
	BindingJSONRPC Binding = "jsonrpc"
	BindingREST    Binding = "rest"
	// BindingGRPC is a gRPC call (protobuf messages, metadata).
	BindingGRPC Binding = "grpc"
)

// Protocol says which wire protocol carried a request. Name and Version are the
// only protocol facts the kernel and policies see; Method is kept for audit.
type Protocol struct {
	Name    string  `json:"name"`
	Version string  `json:"version"`
	Binding Binding `json:"binding"`
	// Method is the JSON-RPC method, or "VERB /path-template" for REST.
	Method string `json:"method"`
}

// PartCounts counts a message's parts by kind.
type PartCounts struct {
	Text int `json:"text"`
	File int `json:"file"`
	Data int `json:"data"`
}

// MessageSummary is what writ keeps of a caller's message: its shape, never its text.
type MessageSummary struct {
	ID         string         `json:"id,omitempty"`
	Role       string         `json:"role,omitempty"` // "user" or "agent"
	Parts      PartCounts     `json:"parts"`
	FileURIs   []string       `json:"file_uris,omitempty"`
	MediaTypes []string       `json:"media_types,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
	Extensions []string       `json:"extensions,omitempty"`
	References []string       `json:"reference_task_ids,omitempty"`
}

// PushConfig is a caller-supplied callback for task notifications. Token and
// Credentials are secrets: they never appear in JSON renderings of a request.
type PushConfig struct {
	ID          string `json:"id,omitempty"`
	URL         string `json:"url"`
	Token       string `json:"-"`
	AuthScheme  string `json:"auth_scheme,omitempty"`
	Credentials string `json:"-"`
}

// MarshalJSON renders the config with has_token / has_credentials in place of the
// secrets themselves.
func (p PushConfig) MarshalJSON() ([]byte, error) {
	type plain PushConfig
	return json.Marshal(struct {
		plain
		HasToken       bool `json:"has_token"`
		HasCredentials bool `json:"has_credentials"`
	}{plain(p), p.Token != "", p.Credentials != ""})
}

// Request is one inbound request after its adapter parsed it: the only form of a
// request that identity, lifecycle checks and policies see.
type Request struct {
	Operation Operation `json:"operation"`
	Protocol  Protocol  `json:"protocol"`
	// Tenant is a tenant named by the request itself (an A2A 1.0 path prefix or
	// params field), not the caller's tenant.
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"task_id,omitempty"`
	ContextID string `json:"context_id,omitempty"`
	// Agent is an agent the request names (ACP agent_name, a card or manifest path).
	Agent string `json:"agent,omitempty"`
	// PushConfigID names a stored push config (get, delete).
	PushConfigID string          `json:"push_config_id,omitempty"`
	Message      *MessageSummary `json:"message,omitempty"`
	Push         *PushConfig     `json:"push,omitempty"`
	// Metadata is the request-level metadata (not the message's).
	Metadata map[string]any `json:"metadata,omitempty"`
	// Classification is the highest data classification declared anywhere in the
	// request (empty when none is declared).
	Classification Level `json:"data_classification,omitempty"`
	// ReturnImmediately is set when the caller asked not to wait for the task.
	ReturnImmediately   bool     `json:"return_immediately,omitempty"`
	HistoryLength       *int     `json:"history_length,omitempty"`
	AcceptedOutputModes []string `json:"accepted_output_modes,omitempty"`
	// Extensions are the protocol extensions the caller activated (header).
	Extensions []string `json:"extensions,omitempty"`
	// Correlation is the request's own id, exactly as sent, that the adapter
	// echoes in every answer (JSON-RPC's id). Opaque to the kernel.
	Correlation json.RawMessage `json:"correlation_id,omitempty"`
}
