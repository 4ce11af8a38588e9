package demo

import (
	"fmt"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/task"
)

// agent is one protected agent of the scenario: how to start it, where writ
// routes it, and the platform metadata writ's config gives it (the seed's cards).
type agent struct {
	key     string // the route without its slash
	start   func(...seedagents.Option) (*seedagents.Agent, error)
	name    string
	owner   string
	tenants []string
	max     task.Level
	schemes []string
	skill   task.Skill
}

var screenSkill = task.Skill{ID: "screen", Name: "Screen a counterparty",
	Description: "Screen a legal entity or individual against SDN, UN and local lists.",
	Tags:        []string{"sanctions", "compliance", "screening"}, Examples: []string{"Screen Acme Trading FZE"}}

var agents = []agent{
	{"sanctions", seedagents.StartSanctions, "sanctions-screening-agent", "group-compliance",
		[]string{"wholesale", "retail"}, task.Restricted, []string{"oauth2"}, screenSkill},
	{"clarifier", seedagents.StartClarifier, "sanctions-clarifier", "group-compliance",
		[]string{"wholesale", "retail"}, task.Restricted, []string{"oauth2"}, screenSkill},
	{"slow", seedagents.StartSlow, "sanctions-slow", "group-compliance",
		[]string{"wholesale", "retail"}, task.Restricted, []string{"oauth2"}, screenSkill},
	{"kyc", seedagents.StartSanctions, "kyc-refresh-agent", "retail-onboarding",
		[]string{"retail"}, task.Confidential, []string{"oauth2"},
		task.Skill{ID: "refresh", Name: "Refresh KYC", Description: "Collect and verify refreshed KYC data.",
			Tags: []string{"kyc", "compliance"}}},
	{"marketing", seedagents.StartSanctions, "marketing-copy-agent", "brand",
		nil, task.Internal, []string{"apikey"},
		task.Skill{ID: "copy", Name: "Write copy", Description: "Draft campaign copy.", Tags: []string{"marketing"}}},
}

// agentName is the name of the agent behind route key.
func agentName(key string) string {
	for _, a := range agents {
		if a.key == key {
			return a.name
		}
	}
	return key
}

// Caller is who a demo token speaks for.
type Caller struct {
	Agent, User, Tenant string
	Class               task.Level
	// Chain are the earlier hops, oldest first (RFC 8693 act nesting).
	Chain []string
}

// The scenario's callers.
var (
	Investigator = Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale",
		Class: task.Restricted, Chain: []string{"orchestrator"}}
	RetailBot = Caller{Agent: "kyc-ops-bot", User: "u-7", Tenant: "retail", Class: task.Confidential}
	// DeepInvestigator is the investigator four hops down.
	DeepInvestigator = Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale", Class: task.Restricted,
		Chain: []string{"orchestrator", "case-router", "aml-triage", "alert-enricher"}}
	// CyclicInvestigator names the sanctions agent earlier in its own chain.
	CyclicInvestigator = Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale", Class: task.Restricted,
		Chain: []string{"orchestrator", "sanctions-screening-agent"}}
)

// token signs a JWT for c: sub is the user, act the RFC 8693 delegation chain
// with c.Agent as the current actor and the earlier hops nested inside it.
func (st *Stage) token(c Caller) string {
	tok, err := st.idp.Token(devidp.Caller{Agent: c.Agent, User: c.User, Tenant: c.Tenant,
		Classification: string(c.Class), Scope: "delegate", Chain: c.Chain})
	if err != nil {
		panic(fmt.Sprintf("signing a demo token: %v", err)) // the key is ours; this cannot fail
	}
	return tok
}
