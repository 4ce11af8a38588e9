package writ.authz_test

test_caller_tenant_in_list_passes if {
	expect(codes(with_field("/target/tenants", ["wholesale"])), [])
}

test_caller_tenant_not_in_list_is_denied if {
	decision := decision_of(with_field("/target/tenants", ["retail"]))
	expect(decision.denials, [{
		"code": "TENANT_NOT_PERMITTED",
		"reason": "sanctions-screening-agent serves tenants [\"retail\"], not the caller's tenant wholesale",
	}])
}

test_empty_list_serves_every_tenant if {
	expect(codes(with_field("/target/tenants", [])), [])
	expect(
		codes(json.patch(valid_request, [
			{"op": "add", "path": "/target/tenants", "value": []},
			{"op": "remove", "path": "/caller/tenant"},
		])),
		[],
	)
}

test_caller_without_tenant_is_denied if {
	decision := decision_of(without_field("/caller/tenant"))
	expect(decision.denials, [{
		"code": "TENANT_NOT_PERMITTED",
		"reason": "sanctions-screening-agent serves tenants [\"wholesale\", \"retail\"], not the caller's tenant (missing)",
	}])
}

test_target_without_tenant_list_is_denied if {
	expect(codes(without_field("/target/tenants")), ["TENANT_NOT_PERMITTED"])
	expect(codes(with_field("/target/tenants", null)), ["TENANT_NOT_PERMITTED"])
	expect(codes(with_field("/target/tenants", "wholesale")), ["TENANT_NOT_PERMITTED"])
}

test_every_operation_is_checked if {
	every operation in ["get", "list", "card", "discover", "push_config.delete"] {
		expect(codes(with_fields({"/operation": operation, "/target/tenants": ["retail"]})), ["TENANT_NOT_PERMITTED"])
	}
}

test_request_naming_the_callers_tenant_passes if {
	expect(codes(with_field("/request/tenant", "wholesale")), [])
	expect(codes(with_field("/request/tenant", "")), [])
	expect(codes(without_field("/request/tenant")), [])
}

test_request_naming_another_tenant_is_denied if {
	decision := decision_of(with_field("/request/tenant", "retail"))
	expect(decision.denials, [{
		"code": "TENANT_NOT_PERMITTED",
		"reason": "the request names tenant retail, not the caller's tenant wholesale",
	}])
}

test_request_naming_a_tenant_for_a_caller_without_one_is_denied if {
	expect(
		codes(json.patch(valid_request, [
			{"op": "add", "path": "/target/tenants", "value": []},
			{"op": "remove", "path": "/caller/tenant"},
			{"op": "add", "path": "/request/tenant", "value": "retail"},
		])),
		["TENANT_NOT_PERMITTED"],
	)
}
