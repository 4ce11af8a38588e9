# DEPTH_EXCEEDED: a delegation may not be passed along too many times.
#
# input.caller.delegation_chain lists the agents that delegated before the caller
# (oldest first, the caller itself excluded). A send or stream is denied when
# that chain already has max_delegation_depth entries or more. A missing chain
# counts as zero hops.
#
# Tuned by: data.writ.config.max_delegation_depth (a number; 4 if not set).
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
