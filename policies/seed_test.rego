# The seed's section-2 admission table (check_delegation), reproduced for the
# payments-investigator caller: tenant wholesale, restricted data, chain
# [orchestrator], scope delegate, authenticated with a JWT. The table is
# written for the limits writ ships, so each expression pins fixture_config.
package writ.authz_test

delegation_to(target) := {
	"version": "writ/v1",
	"operation": "send",
	"caller": {
		"authenticated": true, "method": "jwt", "agent_id": "payments-investigator",
		"user_id": "u-42", "tenant": "wholesale", "scopes": ["delegate"],
		"delegation_chain": ["orchestrator"],
	},
	"target": target,
	"task": {"id": "", "data_classification": "restricted"},
}

sanctions := {
	"name": "sanctions-screening-agent", "tenants": ["wholesale", "retail"],
	"max_data_classification": "restricted", "security_schemes": ["oauth2"],
}

kyc := {
	"name": "kyc-refresh-agent", "tenants": ["retail"],
	"max_data_classification": "confidential", "security_schemes": ["oauth2"],
}

marketing := {
	"name": "marketing-copy-agent", "tenants": [],
	"max_data_classification": "internal", "security_schemes": ["apikey"],
}

test_seed_sanctions_screening_agent_is_allowed if {
	expect(codes(delegation_to(sanctions)), []) with data.writ.config as fixture_config
}

test_seed_kyc_refresh_agent if {
	expect(codes(delegation_to(kyc)), ["CLASSIFICATION_EXCEEDED", "TENANT_NOT_PERMITTED"]) with data.writ.config as fixture_config
}

test_seed_marketing_copy_agent if {
	expect(codes(delegation_to(marketing)), ["CLASSIFICATION_EXCEEDED", "NO_ACCEPTABLE_AUTH"]) with data.writ.config as fixture_config
}

test_seed_chain_depth_four if {
	request := json.patch(delegation_to(sanctions), [{"op": "add", "path": "/caller/delegation_chain", "value": ["a", "b", "c", "d"]}])
	expect(codes(request), ["DEPTH_EXCEEDED"]) with data.writ.config as fixture_config
}

test_seed_cycle if {
	request := json.patch(delegation_to(sanctions), [{"op": "add", "path": "/caller/delegation_chain", "value": ["sanctions-screening-agent"]}])
	expect(codes(request), ["CYCLE_DETECTED"]) with data.writ.config as fixture_config
}
