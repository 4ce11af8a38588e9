package a2a

import "encoding/json"

// The wire shapes below are unions of what A2A 0.3 (JSON-RPC and its proto-JSON REST
// form) and 1.0 send. Decoding into one union and validating per dialect keeps a
// single parser per concept; which fields a dialect may use is checked in validate*.

// dialect is the JSON shape family of a request.
type dialect int

const (
	// rpc03 is A2A 0.3 JSON-RPC: parts with "kind", lowercase roles and states.
	rpc03 dialect = iota
	// rest03 is A2A 0.3 HTTP+JSON, which is proto JSON (parts without "kind",
	// "content" for parts, ROLE_ and TASK_STATE_ enums); writ also accepts the
	// JSON-RPC shapes there, as some 0.3 clients send them.
	rest03
	// v10 is A2A 1.0 (both bindings).
	v10
)

type wireMessage struct {
	Kind             string         `json:"kind"`
	MessageID        string         `json:"messageId"`
	Role             string         `json:"role"`
	Parts            []wirePart     `json:"parts"`
	Content          []wirePart     `json:"content"`
	TaskID           string         `json:"taskId"`
	ContextID        string         `json:"contextId"`
	Metadata         map[string]any `json:"metadata"`
	Extensions       []string       `json:"extensions"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds"`
}

type wirePart struct {
	Kind      *string         `json:"kind,omitempty"`
	Text      *string         `json:"text,omitempty"`
	File      *wireFile       `json:"file,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	URL       *string         `json:"url,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

type wireFile struct {
	Name          string  `json:"name"`
	MimeType      string  `json:"mimeType"`
	Bytes         *string `json:"bytes"`
	URI           *string `json:"uri"`
	FileWithURI   *string `json:"fileWithUri"`
	FileWithBytes *string `json:"fileWithBytes"`
}

type wireAuth struct {
	Schemes     []string `json:"schemes"`
	Scheme      string   `json:"scheme"`
	Credentials string   `json:"credentials"`
}

// wirePush is a push notification config: 0.3 PushNotificationConfig, 0.3
// TaskPushNotificationConfig (nested), or 1.0 TaskPushNotificationConfig (flat).
type wirePush struct {
	Tenant                 string    `json:"tenant"`
	Name                   string    `json:"name"`
	ID                     string    `json:"id"`
	TaskID                 string    `json:"taskId"`
	URL                    string    `json:"url"`
	Token                  string    `json:"token"`
	Authentication         *wireAuth `json:"authentication"`
	PushNotificationConfig *wirePush `json:"pushNotificationConfig"`
}

type wireConfig struct {
	AcceptedOutputModes        []string  `json:"acceptedOutputModes"`
	HistoryLength              *int      `json:"historyLength"`
	Blocking                   *bool     `json:"blocking"`
	ReturnImmediately          *bool     `json:"returnImmediately"`
	PushNotificationConfig     *wirePush `json:"pushNotificationConfig"`
	PushNotification           *wirePush `json:"pushNotification"`
	TaskPushNotificationConfig *wirePush `json:"taskPushNotificationConfig"`
}

// wireParams is the union of every operation's params (JSON-RPC) or body (REST).
type wireParams struct {
	Tenant                   string         `json:"tenant"`
	ID                       string         `json:"id"`
	TaskID                   string         `json:"taskId"`
	ContextID                string         `json:"contextId"`
	HistoryLength            *int           `json:"historyLength"`
	Metadata                 map[string]any `json:"metadata"`
	Message                  *wireMessage   `json:"message"`
	Configuration            *wireConfig    `json:"configuration"`
	PushNotificationConfigID string         `json:"pushNotificationConfigId"`
	PushNotificationConfig   *wirePush      `json:"pushNotificationConfig"`
	Name                     string         `json:"name"`
	URL                      string         `json:"url"`
	Token                    string         `json:"token"`
	Authentication           *wireAuth      `json:"authentication"`
	Status                   string         `json:"status"`
	PageSize                 *int           `json:"pageSize"`
	PageToken                string         `json:"pageToken"`
}

type wireStatus struct {
	State     string       `json:"state"`
	Message   *wireMessage `json:"message"`
	Timestamp string       `json:"timestamp"`
}

type wireArtifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parts       []wirePart     `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

type wireTask struct {
	Kind      string         `json:"kind,omitempty"`
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    *wireStatus    `json:"status"`
	Artifacts []wireArtifact `json:"artifacts,omitempty"`
	History   []wireMessage  `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// wireResult is the union of a send result, a stream event and a task: 0.3 results
// carry "kind"; 1.0 (and 0.3 proto JSON) wrap them in one named field.
type wireResult struct {
	Kind string `json:"kind"`
	// 0.3 flat task / status-update / artifact-update fields.
	ID        string          `json:"id"`
	TaskID    string          `json:"taskId"`
	ContextID string          `json:"contextId"`
	Status    *wireStatus     `json:"status"`
	Artifact  *wireArtifact   `json:"artifact"`
	Artifacts []wireArtifact  `json:"artifacts"`
	History   []wireMessage   `json:"history"`
	Metadata  map[string]any  `json:"metadata"`
	Final     bool            `json:"final"`
	Append    bool            `json:"append"`
	LastChunk bool            `json:"lastChunk"`
	MessageID string          `json:"messageId"`
	Parts     json.RawMessage `json:"parts"`
	// 1.0 / proto wrappers.
	Task           *wireTask   `json:"task"`
	Message        *wireResult `json:"message"`
	Msg            *wireResult `json:"msg"`
	StatusUpdate   *wireResult `json:"statusUpdate"`
	ArtifactUpdate *wireResult `json:"artifactUpdate"`
	// ListTasks.
	Tasks []wireTask `json:"tasks"`
}
