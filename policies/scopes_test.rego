package writ.authz_test

import data.writ.authz

test_caller_with_required_scope_passes if {
	codes(valid_request) == []
}

test_caller_without_scope_is_denied if {
	decision := authz.decision with input as with_field("/caller/scopes", ["read"])
	decision.denials == [{
		"code": "SCOPE_MISSING",
		"reason": "send requires scopes [\"delegate\"]; the caller's token lacks [\"delegate\"]",
	}]
}

test_missing_scopes_are_denied if {
	codes(without_field("/caller/scopes")) == ["SCOPE_MISSING"]
}

test_reason_names_only_the_missing_scopes if {
	decision := authz.decision with input as valid_request with data.writ.config.required_scopes.send as ["delegate", "screen"]
	decision.denials == [{
		"code": "SCOPE_MISSING",
		"reason": "send requires scopes [\"delegate\", \"screen\"]; the caller's token lacks [\"screen\"]",
	}]
}

test_operations_that_need_delegate if {
	every operation in ["stream", "cancel", "push_config.set"] {
		codes(with_fields({"/operation": operation, "/caller/scopes": []})) == ["SCOPE_MISSING"]
	}
}

test_operations_without_required_scopes_pass if {
	every operation in ["get", "list", "subscribe", "card", "discover"] {
		codes(with_fields({"/operation": operation, "/caller/scopes": []})) == []
	}
}

test_missing_config_uses_shipped_scopes if {
	config := object.remove(data.writ.config, ["required_scopes"])
	codes(with_field("/caller/scopes", [])) == ["SCOPE_MISSING"] with data.writ.config as config
	codes(valid_request) == [] with data.writ.config as config
}

test_unauthenticated_caller_gets_only_unauthenticated if {
	codes(with_fields({"/caller/authenticated": false, "/caller/scopes": []})) == ["UNAUTHENTICATED"]
}
