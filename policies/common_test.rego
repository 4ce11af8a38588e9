# Shared test fixtures, and tests for common.rego.
#
# The shipped tests hold for any data.writ.config inside the documented ranges
# (limits; policies/limits_test.go runs them at every end), so a compliance
# change of a limit never needs a test edit. Three rules keep them so:
#
#   - valid_request is fitted to data.writ.config: every check passes on it
#     whatever in-range values data.json holds.
#   - A test of a check's behaviour reads the check's limit from data (through
#     the policy's own rule: authz.max_depth, authz.classification_order, ...).
#   - A test of one setting (an exact reason, a mode) pins it with
#     `with data.writ.config.<key> as <value>` (or fixture_config, all of
#     them) on the expression that builds and decides the request, so the
#     request is fitted to the pinned values too.
#
# Tests compare with expect(got, want), which prints both when they differ.
package writ.authz_test

import data.writ.authz

# The values writ ships in data.json, for tests that quote them (reasons) or
# reproduce a table written for them (seed_test.rego). data.json may differ.
fixture_config := {
	"max_delegation_depth": 4,
	"classification_order": ["public", "internal", "confidential", "restricted"],
	"accepted_auth_schemes": ["oauth2", "openidconnect", "mtls"],
	"auth_methods": authz.scheme_methods,
	"required_scopes": {
		"send": ["delegate"],
		"stream": ["delegate"],
		"cancel": ["delegate"],
		"push_config.set": ["delegate"],
	},
	"ownership": "agent",
	"callbacks": {
		"targets": {"sanctions-screening-agent": ["agents.bank.ae"]},
		"tenants": {"wholesale": ["agents.bank.ae"]},
		"allow_http_hosts": [],
	},
}

# valid_request is the writ/v1 example from the policy contract, as a new
# delegation (no task id, no owner record, no push config: valid_push is one),
# fitted to data.writ.config so that every check passes:
#   - the chain is the example's one hop (orchestrator) when
#     max_delegation_depth admits a hop, else empty;
#   - the task and the target are at the highest level of classification_order;
#   - the target offers every scheme writ accepts, and the caller authenticated
#     the first way the first of them accepts (jwt with the shipped data);
#   - the caller holds every scope any operation requires.
# Other tests change one field at a time and expect the full sorted list of
# denial codes.
valid_request := {
	"version": "writ/v1",
	"direction": "ingress",
	"operation": "send",
	"protocol": {"name": "a2a", "version": "1.0", "binding": "jsonrpc", "method": "SendMessage"},
	"caller": {
		"authenticated": true, "method": fitted_method, "issuer": "https://idp.bank.ae",
		"agent_id": "payments-investigator", "user_id": "u-42", "tenant": "wholesale",
		"scopes": fitted_scopes, "delegation_chain": fitted_chain, "claims": {},
		"classification": "", "chain_id": "", "hops": [],
	},
	"target": {
		"name": "sanctions-screening-agent", "owner": "group-compliance",
		"tenants": ["wholesale", "retail"], "max_data_classification": fitted_level,
		"security_schemes": authz.accepted_auth_schemes,
		"skills": [{"id": "screen", "tags": ["sanctions", "compliance"]}],
		"push_notifications": true,
	},
	"task": {
		"id": "", "context_id": "c-1", "state": "", "data_classification": fitted_level,
		"parts": {"text": 1, "file": 0, "data": 1}, "file_uris": [], "skill": "",
	},
	"request": {
		"method": "POST", "path": "/", "host": "sanctions-screening-agent.agents.bank.ae",
		"source_address": "127.0.0.1", "tenant": "",
	},
}

fitted_chain := array.slice(["orchestrator"], 0, authz.max_depth - 1)

fitted_level := authz.classification_order[count(authz.classification_order) - 1]

fitted_method := data.writ.config.auth_methods[authz.accepted_auth_schemes[0]][0]

fitted_scopes := sort({scope | some scopes in authz.required_scopes; some scope in scopes})

# The example's push config: the callback the fixture configuration allows.
valid_push := {
	"url": "https://agents.bank.ae", "scheme": "https", "host": "agents.bank.ae",
	"port": 443, "has_token": true, "auth_scheme": "Bearer",
}

# data.writ.config with key set to value (replaced, never merged).
config_with(key, value) := object.union(object.remove(data.writ.config, [key]), {key: value})

# The limit errors data.writ.config would have as config that name key: a
# test of one key's range holds whatever data.json says of the others.
limit_errors_for(key, config) := {message |
	some message in errors
	some after in [" ", ".", "["]
	startswith(message, concat("", ["data.writ.config.", key, after]))
} if {
	errors := authz.limit_errors with data.writ.config as config
}

# expect(got, want): true when got == want; otherwise false, after printing
# both (opa test and writ policy test show a failing test's print output).
expect(got, want) if got == want

else := false if {
	print("want:", want)
	print("got: ", got)
}

# The decision writ would return for a request.
decision_of(request) := decision if {
	decision := authz.decision with input as request
}

# The sorted denial codes writ would return for a request.
codes(request) := [d.code | some d in decision_of(request).denials]

# valid_request with one field set (added or replaced), or removed.
# Paths are JSON pointers, e.g. "/caller/tenant".
with_field(path, value) := json.patch(valid_request, [{"op": "add", "path": path, "value": value}])

without_field(path) := json.patch(valid_request, [{"op": "remove", "path": path}])

# valid_request with several fields set: changes is {path: value}.
with_fields(changes) := json.patch(valid_request, [{"op": "add", "path": p, "value": v} | some p, v in changes])

test_valid_request_is_allowed if {
	expect(decision_of(valid_request), {"allow": true, "denials": []})
}

test_valid_request_is_allowed_on_the_fixture_config if {
	expect(decision_of(valid_request), {"allow": true, "denials": []}) with data.writ.config as fixture_config
	expect(decision_of(object.union(valid_request, {"push": valid_push})), {"allow": true, "denials": []}) with data.writ.config as fixture_config
}

test_expect_prints_both_sides_when_they_differ if {
	not expect(["DEPTH_EXCEEDED"], [])
}

test_unknown_operation_is_judged_as_send if {
	expect(codes(with_fields({"/operation": "frobnicate", "/caller/scopes": []})), ["SCOPE_MISSING"]) with data.writ.config.required_scopes as {"send": ["delegate"]}
}

test_missing_operation_is_judged_as_send if {
	request := json.patch(valid_request, [
		{"op": "remove", "path": "/operation"},
		{"op": "add", "path": "/caller/scopes", "value": []},
	])
	expect(codes(request), ["SCOPE_MISSING"]) with data.writ.config.required_scopes as {"send": ["delegate"]}
}

test_shown_marks_missing_values if {
	expect(authz.shown(["caller", "nickname"]), "(missing)") with input as valid_request
	expect(authz.shown(["caller", "tenant", "deeper"]), "(missing)") with input as valid_request
	expect(authz.shown(["caller", "tenant"]), "wholesale") with input as valid_request
}

test_data_is_within_its_documented_range if {
	expect(authz.limit_errors, set())
}

test_every_end_of_every_range_is_in_range if {
	every key, limit in authz.limits {
		every end in limit.ends {
			expect(limit_errors_for(key, config_with(key, end)), set())
		}
	}
}

test_every_limit_has_a_range_and_ends if {
	every limit in authz.limits {
		is_string(limit.range)
		count(limit.ends) > 0
	}
}

test_a_key_no_check_reads_is_refused if {
	config := object.union(data.writ.config, {"max_delegation_dept": 2})
	expect(limit_errors_for("max_delegation_dept", config), {sprintf("data.writ.config.max_delegation_dept is not a limit of this policy (its limits are %v)", [sort(object.keys(authz.limits))])})
}
