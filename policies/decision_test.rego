package writ.authz_test

test_allow_when_no_denials if {
	expect(decision_of(valid_request), {"allow": true, "denials": []})
}

# The reasons quote limits (the depth, the classification order): the
# expression pins the fixture configuration they quote.
test_every_denial_is_reported_sorted_by_code_then_reason if {
	decision := decision_of(with_fields({
		"/caller/delegation_chain": ["sanctions-screening-agent", "b", "c", "d"],
		"/task/data_classification": "secret",
		"/target/max_data_classification": "top",
		"/push": object.union(valid_push, {"has_token": false}),
	})) with data.writ.config as fixture_config
	expect(decision.allow, false)
	expect(decision.denials, [
		{"code": "CALLBACK_UNAUTHENTICATED", "reason": "the callback to agents.bank.ae carries no token"},
		{"code": "CLASSIFICATION_EXCEEDED", "reason": "sanctions-screening-agent's max data classification top is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]"},
		{"code": "CLASSIFICATION_EXCEEDED", "reason": "the task's data classification secret is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]"},
		{"code": "CYCLE_DETECTED", "reason": "sanctions-screening-agent already appears in the delegation chain [\"sanctions-screening-agent\", \"b\", \"c\", \"d\"]"},
		{"code": "DEPTH_EXCEEDED", "reason": "delegation chain is 4 deep; max is 4"},
	])
}

test_decision_is_defined_for_any_input if {
	every request in [{}, {"caller": "x"}, {"caller": {"authenticated": "yes"}}, {"operation": 7}] {
		decision := decision_of(request)
		expect(decision.allow, false)
		"UNAUTHENTICATED" in [d.code | some d in decision.denials]
	}
}
