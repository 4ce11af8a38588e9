package writ.authz_test

import data.writ.authz

shipped_scopes := fixture_config.required_scopes

# The operations that require scopes, and those that require none.
scoped_operations := {operation | some operation, scopes in authz.required_scopes; count(scopes) > 0}

unscoped_operations := authz.known_operations - scoped_operations

test_caller_with_required_scope_passes if {
	expect(codes(valid_request), [])
}

test_each_operation_passes_with_exactly_its_scopes if {
	expect([operation | some operation in authz.known_operations; codes(with_fields({"/operation": operation, "/caller/scopes": object.get(authz.required_scopes, operation, [])})) != []], [])
}

test_operations_that_need_scopes if {
	expect([operation | some operation in scoped_operations; codes(with_fields({"/operation": operation, "/caller/scopes": []})) != ["SCOPE_MISSING"]], [])
}

test_operations_without_required_scopes_pass if {
	expect([operation | some operation in unscoped_operations; codes(with_fields({"/operation": operation, "/caller/scopes": []})) != []], [])
}

test_caller_without_scope_is_denied if {
	decision := decision_of(with_field("/caller/scopes", ["read"])) with data.writ.config.required_scopes as shipped_scopes
	expect(decision.denials, [{
		"code": "SCOPE_MISSING",
		"reason": "send requires scopes [\"delegate\"]; the caller's token lacks [\"delegate\"]",
	}])
}

test_missing_scopes_are_denied if {
	expect(codes(without_field("/caller/scopes")), ["SCOPE_MISSING"]) with data.writ.config.required_scopes as shipped_scopes
}

test_reason_names_only_the_missing_scopes if {
	decision := decision_of(with_field("/caller/scopes", ["delegate"])) with data.writ.config.required_scopes as {"send": ["delegate", "screen"]}
	expect(decision.denials, [{
		"code": "SCOPE_MISSING",
		"reason": "send requires scopes [\"delegate\", \"screen\"]; the caller's token lacks [\"screen\"]",
	}])
}

test_shipped_operations_that_need_delegate if {
	every operation in ["send", "stream", "cancel", "push_config.set"] {
		expect(codes(with_fields({"/operation": operation, "/caller/scopes": []})), ["SCOPE_MISSING"]) with data.writ.config.required_scopes as shipped_scopes
	}
	every operation in ["get", "list", "subscribe", "card", "discover"] {
		expect(codes(with_fields({"/operation": operation, "/caller/scopes": []})), []) with data.writ.config.required_scopes as shipped_scopes
	}
}

test_missing_config_uses_shipped_scopes if {
	config := object.remove(data.writ.config, ["required_scopes"])
	expect(codes(with_field("/caller/scopes", [])), ["SCOPE_MISSING"]) with data.writ.config as config
	expect(codes(with_field("/caller/scopes", ["delegate"])), []) with data.writ.config as config
	expect(authz.required_scopes, shipped_scopes) with data.writ.config as config
}

test_unauthenticated_caller_gets_only_unauthenticated if {
	expect(codes(with_fields({"/caller/authenticated": false, "/caller/scopes": []})), ["UNAUTHENTICATED"])
}

test_required_scopes_out_of_range_are_refused if {
	every scopes in [{"sned": ["delegate"]}, {"send": "delegate"}, {"send": [""]}, {"send": [7]}, ["delegate"]] {
		expect(limit_errors_for("required_scopes", config_with("required_scopes", scopes)), {sprintf("data.writ.config.required_scopes is %v; it must be an object from operations to lists of scope names (non-empty strings); an operation not listed needs none", [scopes])})
	}
}
