package writ.authz_test

import data.writ.authz

test_caller_tenant_in_list_passes if {
	codes(with_field("/target/tenants", ["wholesale"])) == []
}

test_caller_tenant_not_in_list_is_denied if {
	decision := authz.decision with input as with_field("/target/tenants", ["retail"])
	decision.denials == [{
		"code": "TENANT_NOT_PERMITTED",
		"reason": "sanctions-screening-agent serves tenants [\"retail\"], not the caller's tenant wholesale",
	}]
}

test_empty_list_serves_every_tenant if {
	codes(with_field("/target/tenants", [])) == []
	codes(json.patch(valid_request, [
		{"op": "add", "path": "/target/tenants", "value": []},
		{"op": "remove", "path": "/caller/tenant"},
	])) == []
}

test_caller_without_tenant_is_denied if {
	decision := authz.decision with input as without_field("/caller/tenant")
	decision.denials == [{
		"code": "TENANT_NOT_PERMITTED",
		"reason": "sanctions-screening-agent serves tenants [\"wholesale\", \"retail\"], not the caller's tenant (missing)",
	}]
}

test_target_without_tenant_list_is_denied if {
	codes(without_field("/target/tenants")) == ["TENANT_NOT_PERMITTED"]
	codes(with_field("/target/tenants", null)) == ["TENANT_NOT_PERMITTED"]
	codes(with_field("/target/tenants", "wholesale")) == ["TENANT_NOT_PERMITTED"]
}

test_every_operation_is_checked if {
	every operation in ["get", "list", "card", "discover", "push_config.delete"] {
		codes(with_fields({"/operation": operation, "/target/tenants": ["retail"]})) == ["TENANT_NOT_PERMITTED"]
	}
}

test_request_naming_the_callers_tenant_passes if {
	codes(with_field("/request/tenant", "wholesale")) == []
	codes(with_field("/request/tenant", "")) == []
	codes(without_field("/request/tenant")) == []
}

test_request_naming_another_tenant_is_denied if {
	decision := authz.decision with input as with_field("/request/tenant", "retail")
	decision.denials == [{
		"code": "TENANT_NOT_PERMITTED",
		"reason": "the request names tenant retail, not the caller's tenant wholesale",
	}]
}

test_request_naming_a_tenant_for_a_caller_without_one_is_denied if {
	codes(json.patch(valid_request, [
		{"op": "add", "path": "/target/tenants", "value": []},
		{"op": "remove", "path": "/caller/tenant"},
		{"op": "add", "path": "/request/tenant", "value": "retail"},
	])) == ["TENANT_NOT_PERMITTED"]
}
