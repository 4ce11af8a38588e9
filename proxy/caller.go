package proxy

import (
	"encoding/json"

	"github.com/writ-authz/writ/authz/identity"
)

// CallerHeader carries the verified caller to the upstream agent. writ sets it on
// every forwarded request and strips it from every inbound one, so an agent can
// trust it as long as only writ can reach the agent.
const CallerHeader = "Writ-Caller"

// DecisionHeader carries the id of the decision that let a request through (or
// refused it), to find it in the decision log.
const DecisionHeader = "Writ-Decision-Id"

// callerDoc is the JSON of the Writ-Caller header.
type callerDoc struct {
	Authenticated bool     `json:"authenticated"`
	Method        string   `json:"method"`
	Issuer        string   `json:"issuer,omitempty"`
	AgentID       string   `json:"agent_id,omitempty"`
	UserID        string   `json:"user_id,omitempty"`
	Tenant        string   `json:"tenant,omitempty"`
	Chain         []string `json:"chain"`
}

func callerHeader(c identity.Caller) string {
	chain := c.Chain
	if chain == nil {
		chain = []string{}
	}
	raw, _ := json.Marshal(callerDoc{Authenticated: c.Authenticated, Method: c.Method, Issuer: c.Issuer,
		AgentID: c.AgentID, UserID: c.UserID, Tenant: c.Tenant, Chain: chain})
	return string(raw)
}
