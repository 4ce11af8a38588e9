# AUTHORITY_WIDENED: delegated authority only narrows along the chain.
#
# input.caller.hops lists what each actor of the delegation chain held when it
# delegated, oldest first, the caller last: {agent_id, scopes,
# scopes_recorded, tenant, classification}, where the token records them
# (writ reads them from the RFC 8693 act claims its STS writes: tenant and
# classification "" and scopes_recorded false where an act records none; a
# token that records none has no hops, and then this check has nothing to
# compare). A request is denied
# when the caller's scope holds one that some hop was not granted, when the
# task's data classification (or the caller's ceiling) ranks above some hop's
# ceiling, or when some hop acted in another tenant than the caller's.
#
# Tuned by: data.writ.config.classification_order (the ranking; see
# classification.rego).
package writ.authz

# The hops, when the input carries them as a list.
hops := input.caller.hops if is_array(input.caller.hops)

# A hops field that is not a list cannot be compared: it denies.
denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": "the delegation's hops cannot be read",
} if {
	given := input.caller.hops
	not is_array(given)
}

# A hop that is not an object with an agent id cannot be compared: it denies.
denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": sprintf("hop %v of the delegation cannot be read", [i]),
} if {
	some i, hop in hops
	not readable_hop(hop)
}

readable_hop(hop) if is_string(hop.agent_id)

denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": sprintf("scope %v was not granted to %v", [scope, shown_hop(hop)]),
} if {
	some hop in hops
	hop.scopes_recorded == true
	some scope in input.caller.scopes
	not scope in hop.scopes
}

denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": sprintf("the task carries %v; %v was cleared up to %v", [input.task.data_classification, shown_hop(hop), hop.classification]),
} if {
	some hop in hops
	rank[input.task.data_classification] > rank[hop.classification]
}

denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": sprintf("the caller is cleared up to %v; %v was cleared up to %v", [input.caller.classification, shown_hop(hop), hop.classification]),
} if {
	some hop in hops
	rank[input.caller.classification] > rank[hop.classification]
}

denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": sprintf("%v acted in tenant %v, the caller in %v", [shown_hop(hop), hop.tenant, shown(["caller", "tenant"])]),
} if {
	some hop in hops
	recorded(hop.tenant)
	hop.tenant != caller_tenant
}

# The caller's tenant, "" when it names none (so that a hop's tenant never
# matches a missing one).
default caller_tenant := ""

caller_tenant := input.caller.tenant if is_string(input.caller.tenant)

# A hop's classification the ranking does not know: nothing to compare it
# with, so it denies (a ceiling that cannot be read is not no ceiling).
denials contains {
	"code": "AUTHORITY_WIDENED",
	"reason": sprintf("%v's ceiling %v is not one of %v", [shown_hop(hop), hop.classification, classification_order]),
} if {
	some hop in hops
	recorded(hop.classification)
	not hop.classification in classification_order
}

# A grant is recorded when it is a non-empty string.
recorded(v) if {
	is_string(v)
	v != ""
}

shown_hop(hop) := hop.agent_id if is_string(hop.agent_id)

else := "(unnamed hop)"
