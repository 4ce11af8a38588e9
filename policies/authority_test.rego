package writ.authz_test

import data.writ.authz

# A two-hop delegation that narrowed at every hop: orchestrator held
# delegate and pay, payments-investigator (the caller) delegate only.
narrowed := with_field("/caller/hops", [
	hop("orchestrator", ["delegate", "pay"], "wholesale", "restricted"),
	hop("payments-investigator", ["delegate"], "wholesale", "restricted"),
])

# A hop as writ's input carries it: every grant recorded.
hop(agent, scopes, tenant, classification) := {
	"agent_id": agent, "scopes": scopes, "scopes_recorded": true,
	"tenant": tenant, "classification": classification,
}

# A hop whose act records nothing.
bare(agent) := {"agent_id": agent, "scopes": [], "scopes_recorded": false, "tenant": "", "classification": ""}

test_narrowing_chain_passes if {
	codes(narrowed) == []
}

test_no_hops_has_nothing_to_compare if {
	codes(valid_request) == []
	codes(with_field("/caller/hops", [])) == []
}

test_hops_without_grants_pass if {
	codes(with_field("/caller/hops", [bare("orchestrator"), bare("payments-investigator")])) == []
}

test_scope_not_granted_by_a_hop_is_denied if {
	request := with_field("/caller/hops", [
		object.union(bare("orchestrator"), {"scopes": ["read"], "scopes_recorded": true}),
		object.union(bare("payments-investigator"), {"scopes": ["delegate"], "scopes_recorded": true}),
	])
	decision := authz.decision with input as request
	decision.denials == [{"code": "AUTHORITY_WIDENED", "reason": "scope delegate was not granted to orchestrator"}]
}

test_every_widened_scope_is_named if {
	request := with_fields({
		"/caller/scopes": ["delegate", "pay"],
		"/caller/hops": [object.union(bare("orchestrator"), {"scopes_recorded": true})],
	})
	decision := authz.decision with input as request
	decision.denials == [
		{"code": "AUTHORITY_WIDENED", "reason": "scope delegate was not granted to orchestrator"},
		{"code": "AUTHORITY_WIDENED", "reason": "scope pay was not granted to orchestrator"},
	]
}

test_task_above_a_hops_ceiling_is_denied if {
	request := with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": "internal"})])
	decision := authz.decision with input as request
	decision.denials == [{"code": "AUTHORITY_WIDENED", "reason": "the task carries restricted; orchestrator was cleared up to internal"}]
}

test_caller_ceiling_above_a_hops_is_denied if {
	request := with_fields({
		"/task/data_classification": "public",
		"/caller/classification": "confidential",
		"/caller/hops": [object.union(bare("orchestrator"), {"classification": "internal"})],
	})
	decision := authz.decision with input as request
	decision.denials == [{"code": "AUTHORITY_WIDENED", "reason": "the caller is cleared up to confidential; orchestrator was cleared up to internal"}]
}

test_equal_ceilings_pass if {
	codes(with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": "restricted"})])) == []
}

test_another_tenant_on_a_hop_is_denied if {
	request := with_field("/caller/hops", [object.union(bare("orchestrator"), {"tenant": "retail"})])
	decision := authz.decision with input as request
	decision.denials == [{"code": "AUTHORITY_WIDENED", "reason": "orchestrator acted in tenant retail, the caller in wholesale"}]
}

test_a_caller_without_tenant_cannot_match_a_hops if {
	request := json.patch(with_field("/caller/hops", [object.union(bare("orchestrator"), {"tenant": "wholesale"})]), [{"op": "remove", "path": "/caller/tenant"}])
	"AUTHORITY_WIDENED" in codes(request)
}

test_unknown_hop_ceiling_is_denied if {
	request := with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": "secret"})])
	decision := authz.decision with input as request
	decision.denials == [{
		"code": "AUTHORITY_WIDENED",
		"reason": "orchestrator's ceiling secret is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]",
	}]
}

test_unreadable_hops_are_denied if {
	codes(with_field("/caller/hops", "orchestrator")) == ["AUTHORITY_WIDENED"]
	codes(with_field("/caller/hops", [7])) == ["AUTHORITY_WIDENED"]
	codes(with_field("/caller/hops", [object.remove(bare("orchestrator"), ["agent_id"])])) == ["AUTHORITY_WIDENED"]
}

test_unnamed_hop_reason_is_defined if {
	request := with_field("/caller/hops", [{"scopes": ["read"], "scopes_recorded": true}])
	decision := authz.decision with input as request
	decision.denials == [
		{"code": "AUTHORITY_WIDENED", "reason": "hop 0 of the delegation cannot be read"},
		{"code": "AUTHORITY_WIDENED", "reason": "scope delegate was not granted to (unnamed hop)"},
	]
}
