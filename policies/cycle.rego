# CYCLE_DETECTED: a delegation may not loop back to an agent already involved.
#
# A send or stream (on egress, every call: common.rego's delegating) is
# denied when the target agent already appears in the caller's delegation
# chain, when the caller delegates to itself, or when the target has no name
# (a cycle cannot then be ruled out).
#
# Tuned by: nothing in data.
package writ.authz

target_named if {
	is_string(input.target.name)
	input.target.name != ""
}

denials contains {
	"code": "CYCLE_DETECTED",
	"reason": sprintf("%v already appears in the delegation chain %v", [input.target.name, input.caller.delegation_chain]),
} if {
	delegating
	input.target.name in input.caller.delegation_chain
}

denials contains {
	"code": "CYCLE_DETECTED",
	"reason": sprintf("%v is delegating to itself", [input.caller.agent_id]),
} if {
	delegating
	input.caller.agent_id == input.target.name
}

denials contains {
	"code": "CYCLE_DETECTED",
	"reason": "the target agent has no name, so a cycle cannot be ruled out",
} if {
	delegating
	not target_named
}
