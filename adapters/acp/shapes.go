package acp

// The request bodies writ reads, with the field names of the ACP spec
// (OpenAPI 0.2.0) and the reference SDK. writ itself reads bodies by exact key
// (obj), as the Python SDK does; these types only feed the field-case guard.
// An agent that decodes with encoding/json, or any other case-insensitive
// reader, would take "Agent_Name" or "ſession_id" (U+017F) for the field:
// such a key is refused at every depth these types describe, so every kind of
// agent reads the request writ decided on. Free-form members (metadata) are
// user data and are not checked.

type wireRunCreate struct {
	AgentName string        `json:"agent_name"`
	SessionID string        `json:"session_id"`
	Session   *wireSession  `json:"session"`
	Input     []wireMessage `json:"input"`
	Mode      string        `json:"mode"`
}

type wireRunResume struct {
	RunID       string           `json:"run_id"`
	AwaitResume *wireAwaitResume `json:"await_resume"`
	Mode        string           `json:"mode"`
}

// wireAwaitResume is the SDK's MessageAwaitResume; the spec leaves it free.
type wireAwaitResume struct {
	Type    string       `json:"type"`
	Message *wireMessage `json:"message"`
}

type wireSession struct {
	ID      string   `json:"id"`
	History []string `json:"history"`
	State   string   `json:"state"`
}

type wireMessage struct {
	Role        string     `json:"role"`
	Parts       []wirePart `json:"parts"`
	CreatedAt   string     `json:"created_at"`
	CompletedAt string     `json:"completed_at"`
}

type wirePart struct {
	Name            string         `json:"name"`
	ContentType     string         `json:"content_type"`
	Content         string         `json:"content"`
	ContentEncoding string         `json:"content_encoding"`
	ContentURL      string         `json:"content_url"`
	Metadata        map[string]any `json:"metadata"`
}
