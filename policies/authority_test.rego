# Tests that quote a scope or a level pin the configuration they quote
# (fixture_config: the caller holds delegate, the task is restricted); the
# others grant what valid_request holds under data.json.
package writ.authz_test

import data.writ.authz

# A two-hop delegation that narrowed at every hop: orchestrator held what the
# caller holds and pay, payments-investigator (the caller) what it holds.
narrowed := with_field("/caller/hops", [
	hop("orchestrator", array.concat(fitted_scopes, ["pay"]), "wholesale", fitted_level),
	hop("payments-investigator", fitted_scopes, "wholesale", fitted_level),
])

# A hop as writ's input carries it: every grant recorded.
hop(agent, scopes, tenant, classification) := {
	"agent_id": agent, "scopes": scopes, "scopes_recorded": true,
	"tenant": tenant, "classification": classification,
}

# A hop whose act records nothing.
bare(agent) := {"agent_id": agent, "scopes": [], "scopes_recorded": false, "tenant": "", "classification": ""}

test_narrowing_chain_passes if {
	expect(codes(narrowed), [])
}

test_no_hops_has_nothing_to_compare if {
	expect(codes(valid_request), [])
	expect(codes(with_field("/caller/hops", [])), [])
}

test_hops_without_grants_pass if {
	expect(codes(with_field("/caller/hops", [bare("orchestrator"), bare("payments-investigator")])), [])
}

test_scope_not_granted_by_a_hop_is_denied if {
	decision := decision_of(with_field("/caller/hops", [
		object.union(bare("orchestrator"), {"scopes": ["read"], "scopes_recorded": true}),
		object.union(bare("payments-investigator"), {"scopes": ["delegate"], "scopes_recorded": true}),
	])) with data.writ.config as fixture_config
	expect(decision.denials, [{"code": "AUTHORITY_WIDENED", "reason": "scope delegate was not granted to orchestrator"}])
}

test_every_widened_scope_is_named if {
	decision := decision_of(with_fields({
		"/caller/scopes": ["delegate", "pay"],
		"/caller/hops": [object.union(bare("orchestrator"), {"scopes_recorded": true})],
	})) with data.writ.config as fixture_config
	expect(decision.denials, [
		{"code": "AUTHORITY_WIDENED", "reason": "scope delegate was not granted to orchestrator"},
		{"code": "AUTHORITY_WIDENED", "reason": "scope pay was not granted to orchestrator"},
	])
}

test_task_above_a_hops_ceiling_is_denied if {
	decision := decision_of(with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": "internal"})])) with data.writ.config as fixture_config
	expect(decision.denials, [{"code": "AUTHORITY_WIDENED", "reason": "the task carries restricted; orchestrator was cleared up to internal"}])
}

test_caller_ceiling_above_a_hops_is_denied if {
	decision := decision_of(with_fields({
		"/task/data_classification": "public",
		"/caller/classification": "confidential",
		"/caller/hops": [object.union(bare("orchestrator"), {"classification": "internal"})],
	})) with data.writ.config as fixture_config
	expect(decision.denials, [{"code": "AUTHORITY_WIDENED", "reason": "the caller is cleared up to confidential; orchestrator was cleared up to internal"}])
}

test_equal_ceilings_pass if {
	expect(codes(with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": fitted_level})])), [])
}

test_every_ceiling_below_the_task_is_denied if {
	levels := authz.classification_order
	widened := [level |
		some i, level in levels
		i < count(levels) - 1
		codes(with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": level})])) != ["AUTHORITY_WIDENED"]
	]
	expect(widened, [])
}

test_another_tenant_on_a_hop_is_denied if {
	decision := decision_of(with_field("/caller/hops", [object.union(bare("orchestrator"), {"tenant": "retail"})]))
	expect(decision.denials, [{"code": "AUTHORITY_WIDENED", "reason": "orchestrator acted in tenant retail, the caller in wholesale"}])
}

test_a_caller_without_tenant_cannot_match_a_hops if {
	request := json.patch(with_field("/caller/hops", [object.union(bare("orchestrator"), {"tenant": "wholesale"})]), [{"op": "remove", "path": "/caller/tenant"}])
	"AUTHORITY_WIDENED" in codes(request)
}

test_unknown_hop_ceiling_is_denied if {
	decision := decision_of(with_field("/caller/hops", [object.union(bare("orchestrator"), {"classification": "secret"})])) with data.writ.config as fixture_config
	expect(decision.denials, [{
		"code": "AUTHORITY_WIDENED",
		"reason": "orchestrator's ceiling secret is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]",
	}])
}

test_unreadable_hops_are_denied if {
	expect(codes(with_field("/caller/hops", "orchestrator")), ["AUTHORITY_WIDENED"])
	expect(codes(with_field("/caller/hops", [7])), ["AUTHORITY_WIDENED"])
	expect(codes(with_field("/caller/hops", [object.remove(bare("orchestrator"), ["agent_id"])])), ["AUTHORITY_WIDENED"])
}

test_unnamed_hop_reason_is_defined if {
	decision := decision_of(with_field("/caller/hops", [{"scopes": ["read"], "scopes_recorded": true}])) with data.writ.config as fixture_config
	expect(decision.denials, [
		{"code": "AUTHORITY_WIDENED", "reason": "hop 0 of the delegation cannot be read"},
		{"code": "AUTHORITY_WIDENED", "reason": "scope delegate was not granted to (unnamed hop)"},
	])
}
