package task

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	// EventTask carries a full task snapshot (state, artifacts).
	EventTask EventKind = "task"
	// EventStatus reports a state change.
	EventStatus EventKind = "status"
	// EventArtifact reports an artifact produced (or a chunk of one).
	EventArtifact EventKind = "artifact"
	// EventMessage is a direct reply that creates no task.
	EventMessage EventKind = "message"
	// EventError is an error the upstream reported (mid-stream or as the response).
	EventError EventKind = "error"
)

// Event is one thing an upstream response or stream said about a task. Adapters
// produce events; the lifecycle store consumes them through Advance.
type Event struct {
	Kind      EventKind `json:"kind"`
	TaskID    string    `json:"task_id,omitempty"`
	ContextID string    `json:"context_id,omitempty"`
	// State is set for task and status events.
	State State `json:"state,omitempty"`
	// Final marks the last event of a stream when the protocol says so.
	Final bool `json:"final,omitempty"`
	// Artifact is set for artifact events.
	Artifact *ArtifactRef `json:"artifact,omitempty"`
	// Task is the snapshot of a task event.
	Task *Task `json:"task,omitempty"`
	// Err is set for error events.
	Err *Fault `json:"error,omitempty"`
}

// ArtifactRef identifies an artifact without its content.
type ArtifactRef struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Append    bool   `json:"append,omitempty"`
	LastChunk bool   `json:"last_chunk,omitempty"`
}
