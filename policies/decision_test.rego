package writ.authz_test

import data.writ.authz

test_allow_when_no_denials if {
	authz.decision == {"allow": true, "denials": []} with input as valid_request
}

test_every_denial_is_reported_sorted_by_code_then_reason if {
	request := with_fields({
		"/caller/delegation_chain": ["sanctions-screening-agent", "b", "c", "d"],
		"/task/data_classification": "secret",
		"/target/max_data_classification": "top",
		"/push/has_token": false,
	})
	decision := authz.decision with input as request
	decision.allow == false
	decision.denials == [
		{"code": "CALLBACK_UNAUTHENTICATED", "reason": "the callback to agents.bank.ae carries no token"},
		{"code": "CLASSIFICATION_EXCEEDED", "reason": "sanctions-screening-agent's max data classification top is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]"},
		{"code": "CLASSIFICATION_EXCEEDED", "reason": "the task's data classification secret is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]"},
		{"code": "CYCLE_DETECTED", "reason": "sanctions-screening-agent already appears in the delegation chain [\"sanctions-screening-agent\", \"b\", \"c\", \"d\"]"},
		{"code": "DEPTH_EXCEEDED", "reason": "delegation chain is 4 deep; max is 4"},
	]
}

test_decision_is_defined_for_any_input if {
	every request in [{}, {"caller": "x"}, {"caller": {"authenticated": "yes"}}, {"operation": 7}] {
		decision := authz.decision with input as request
		decision.allow == false
		"UNAUTHENTICATED" in [d.code | some d in decision.denials]
	}
}
