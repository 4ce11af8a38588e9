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
