package task

// Owner is the caller who created a task. Follow-up operations are checked against it.
type Owner struct {
	AgentID string `json:"agent_id"`
	Tenant  string `json:"tenant"`
	UserID  string `json:"user_id"`
}

// Task is the unit of delegated work, independent of any protocol.
//
// ContextID groups related tasks: one investigation may delegate several tasks to
// several agents, and the context ties them into one story in the audit record.
type Task struct {
	ID        string `json:"id"`
	ContextID string `json:"context_id"`
	State     State  `json:"state"`
	// InputText joins the text parts of the caller's first message.
	InputText string `json:"input_text,omitempty"`
	// OutputText joins the text parts of every artifact, in order.
	OutputText string `json:"output_text,omitempty"`
	// Structured merges the data parts of every artifact (later keys win).
	Structured map[string]any `json:"structured,omitempty"`
	// Artifacts names every artifact the task produced, in order.
	Artifacts []string `json:"artifacts,omitempty"`
	// Chain is the delegation chain that led to this task, oldest hop first.
	Chain          []string `json:"delegation_chain,omitempty"`
	Owner          Owner    `json:"owner"`
	Classification Level    `json:"data_classification,omitempty"`
}
