# DEPTH_EXCEEDED: a delegation may not be passed along too many times.
#
# input.caller.delegation_chain lists the agents that delegated before the caller
# (oldest first, the caller itself excluded). A send or stream (on egress,
# every call: common.rego's delegating) is denied when that chain already has
# max_delegation_depth entries or more. A missing chain
# counts as zero hops.
#
# Tuned by: data.writ.config.max_delegation_depth, an integer from 1 to 16
#           (shipped: 4; 4 if not set). 1 admits direct callers only: a caller
#           that was itself delegated to is denied.
package writ.authz

default max_depth := 4

max_depth := data.writ.config.max_delegation_depth

default chain_length := 0

chain_length := count(input.caller.delegation_chain)

# A max depth that is not a number denies every delegation.
within_depth if {
	is_number(max_depth)
	chain_length < max_depth
}

denials contains {
	"code": "DEPTH_EXCEEDED",
	"reason": sprintf("delegation chain is %v deep; max is %v", [chain_length, max_depth]),
} if {
	delegating
	not within_depth
}

limits["max_delegation_depth"] := {"range": "an integer from 1 to 16", "ends": [1, 16]}

max_depth_in_range if {
	is_number(max_depth)
	max_depth == round(max_depth)
	max_depth >= limits.max_delegation_depth.ends[0]
	max_depth <= limits.max_delegation_depth.ends[1]
}

limit_errors contains limit_error("max_delegation_depth") if not max_depth_in_range
