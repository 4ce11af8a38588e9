# Shared test fixtures, and tests for common.rego.
#
# valid_request is the writ/v1 example from the policy contract, as a new
# delegation (no task id, no owner record): every check passes. Other tests
# change one field at a time and assert the full sorted list of denial codes.
package writ.authz_test

import data.writ.authz

valid_request := {
	"version": "writ/v1",
	"direction": "ingress",
	"operation": "send",
	"protocol": {"name": "a2a", "version": "1.0", "binding": "jsonrpc", "method": "SendMessage"},
	"caller": {
		"authenticated": true, "method": "jwt", "issuer": "https://idp.bank.ae",
		"agent_id": "payments-investigator", "user_id": "u-42", "tenant": "wholesale",
		"scopes": ["delegate"], "delegation_chain": ["orchestrator"], "claims": {},
		"classification": "", "chain_id": "", "hops": [],
	},
	"target": {
		"name": "sanctions-screening-agent", "owner": "group-compliance",
		"tenants": ["wholesale", "retail"], "max_data_classification": "restricted",
		"security_schemes": ["oauth2", "mtls"],
		"skills": [{"id": "screen", "tags": ["sanctions", "compliance"]}],
		"push_notifications": true,
	},
	"task": {
		"id": "", "context_id": "c-1", "state": "", "data_classification": "restricted",
		"parts": {"text": 1, "file": 0, "data": 1}, "file_uris": [], "skill": "",
	},
	"push": {
		"url": "https://agents.bank.ae", "scheme": "https", "host": "agents.bank.ae",
		"port": 443, "has_token": true, "auth_scheme": "Bearer",
	},
	"request": {
		"method": "POST", "path": "/", "host": "sanctions-screening-agent.agents.bank.ae",
		"source_address": "127.0.0.1", "tenant": "",
	},
}

# The sorted denial codes writ would return for a request.
codes(request) := [d.code | some d in decision.denials] if {
	decision := authz.decision with input as request
}

# valid_request with one field set (added or replaced), or removed.
# Paths are JSON pointers, e.g. "/caller/tenant".
with_field(path, value) := json.patch(valid_request, [{"op": "add", "path": path, "value": value}])

without_field(path) := json.patch(valid_request, [{"op": "remove", "path": path}])

# valid_request with several fields set: changes is {path: value}.
with_fields(changes) := json.patch(valid_request, [{"op": "add", "path": p, "value": v} | some p, v in changes])

test_valid_request_is_allowed if {
	authz.decision == {"allow": true, "denials": []} with input as valid_request
}

test_unknown_operation_is_judged_as_send if {
	codes(with_fields({"/operation": "frobnicate", "/caller/scopes": []})) == ["SCOPE_MISSING"]
}

test_missing_operation_is_judged_as_send if {
	request := json.patch(valid_request, [
		{"op": "remove", "path": "/operation"},
		{"op": "add", "path": "/caller/scopes", "value": []},
	])
	codes(request) == ["SCOPE_MISSING"]
}

test_list_needs_no_scope if {
	codes(with_fields({"/operation": "list", "/caller/scopes": []})) == []
}

test_shown_marks_missing_values if {
	authz.shown(["caller", "nickname"]) == "(missing)" with input as valid_request
	authz.shown(["caller", "tenant", "deeper"]) == "(missing)" with input as valid_request
	authz.shown(["caller", "tenant"]) == "wholesale" with input as valid_request
}
