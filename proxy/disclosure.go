package proxy

import (
	"fmt"

	"github.com/writ-authz/writ/task"
)

// What a refused caller learns: the denial codes, each with a neutral reason.
// The policy's own reasons quote platform metadata (an agent's tenants, its
// classification ceiling, the callback allow-list) and go to the decision log
// only. A code a custom policy adds gets the generic reason.
var publicReasons = map[string]string{
	"UNAUTHENTICATED":          "the caller is not authenticated",
	"DEPTH_EXCEEDED":           "the delegation chain is longer than the policy allows",
	"CYCLE_DETECTED":           "the delegation chain passes through the target agent already",
	"TENANT_NOT_PERMITTED":     "the target agent does not serve the caller's tenant",
	"CLASSIFICATION_EXCEEDED":  "the request's data classification exceeds what the target agent may receive",
	"NO_ACCEPTABLE_AUTH":       "the caller's authentication is not one the target agent accepts",
	"CALLBACK_NOT_ALLOWED":     "the push callback is not on the allow-list",
	"CALLBACK_UNAUTHENTICATED": "the push callback carries no token",
	"SCOPE_MISSING":            "the caller's token lacks a scope the operation needs",
	"NOT_TASK_OWNER":           "the task is not the caller's",
	"AUTHORITY_WIDENED":        "the caller's authority is wider than its delegation chain granted",
	"POLICY_ERROR":             "the policy could not decide; the request is refused",
}

// publicReason is the neutral reason shown to a caller for code.
func publicReason(code string) string {
	if r, ok := publicReasons[code]; ok {
		return r
	}
	return "denied by policy"
}

// denialFault maps a denial to what the caller sees: a task owned by someone
// else is not found; an unauthenticated caller gets 401 with one
// UNAUTHENTICATED and nothing else; anyone else 403 with every denial code and
// its neutral reason.
func (c *Core) denialFault(x *exchange) *task.Fault {
	for _, d := range x.dec.Denials {
		if d.Code == "NOT_TASK_OWNER" {
			return notFound(x.req.TaskID)
		}
	}
	if !x.caller.Authenticated {
		return &task.Fault{Kind: task.KindUnauthenticated, Message: "authentication required",
			Denials: []task.Denial{{Code: "UNAUTHENTICATED", Reason: publicReason("UNAUTHENTICATED")}}}
	}
	denials := make([]task.Denial, len(x.dec.Denials))
	for i, d := range x.dec.Denials {
		denials[i] = task.Denial{Code: d.Code, Reason: publicReason(d.Code)}
	}
	// The message names the operation and the decision, never the agent: the
	// caller reached it by a route, and its name is platform metadata (an
	// agent hidden from this caller is a 404 everywhere else).
	return &task.Fault{Kind: task.KindDenied, Message: fmt.Sprintf("%s denied by policy (decision %s)",
		x.req.Operation, x.dec.ID), Denials: denials}
}

// challenge adds what an HTTP client needs to authenticate to a refusal of an
// unauthenticated caller (RFC 9110 section 11.6.1).
func challenge(out *Outcome) {
	if out.Fault != nil && out.Fault.Kind == task.KindUnauthenticated {
		out.Answer.Header = withHeader(out.Answer.Header, "WWW-Authenticate", "Bearer")
	}
}
