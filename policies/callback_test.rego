# Tests of the rules pin the allow-lists to the fixture's (callbacks,
# agents.bank.ae for the target and the tenant); the tests that read
# data.writ.config.callbacks check every host it lists.
package writ.authz_test

import data.writ.authz

callbacks := fixture_config.callbacks

# valid_request with valid_push, then changes ({path: value}) applied.
with_push(changes) := json.patch(object.union(valid_request, {"push": valid_push}), [{"op": "add", "path": p, "value": v} | some p, v in changes])

# The callback denials of a request (other checks may deny what data lists,
# a target named like the caller, say).
callback_codes(request) := [code | some code in codes(request); startswith(code, "CALLBACK_")]

test_no_push_config_is_not_checked if {
	expect(codes(valid_request), []) with data.writ.config.callbacks as {}
}

test_allowed_host_passes if {
	expect(codes(with_push({})), []) with data.writ.config.callbacks as callbacks
}

test_every_host_listed_for_a_target_is_allowed_for_it if {
	refused := [[target, host] |
		some target, hosts in object.get(data.writ.config, ["callbacks", "targets"], {})
		some host in hosts
		callback_codes(with_push({"/target/name": target, "/caller/tenant": "", "/target/tenants": [], "/push/host": host})) != []
	]
	expect(refused, [])
}

test_every_host_listed_for_a_tenant_is_allowed_for_it if {
	refused := [[tenant, host] |
		some tenant, hosts in object.get(data.writ.config, ["callbacks", "tenants"], {})
		some host in hosts
		callback_codes(with_push({"/target/name": "unlisted-agent", "/caller/tenant": tenant, "/target/tenants": [], "/push/host": host})) != []
	]
	expect(refused, [])
}

test_every_http_host_listed_may_be_called_over_http if {
	refused := [host | some host in object.get(data.writ.config, ["callbacks", "allow_http_hosts"], []); not authz.callback_scheme_allowed with input as with_push({"/push/scheme": "http", "/push/host": host})]
	expect(refused, [])
}

test_host_allowed_for_the_tenant_only_passes if {
	expect(codes(with_push({})), []) with data.writ.config.callbacks as object.union(callbacks, {"targets": {}})
}

test_host_allowed_for_the_target_only_passes if {
	expect(codes(with_push({})), []) with data.writ.config.callbacks as object.union(callbacks, {"tenants": {}})
}

test_host_not_listed_is_denied if {
	decision := decision_of(with_push({"/push/host": "evil.example"})) with data.writ.config.callbacks as callbacks
	expect(decision.denials, [{
		"code": "CALLBACK_NOT_ALLOWED",
		"reason": "callback host evil.example is not allowed for target sanctions-screening-agent or tenant wholesale",
	}])
}

test_host_must_match_exactly if {
	expect(codes(with_push({"/push/host": "x.agents.bank.ae"})), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config.callbacks as callbacks
	expect(codes(with_push({"/push/host": "AGENTS.BANK.AE"})), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config.callbacks as callbacks
}

test_http_scheme_is_denied if {
	decision := decision_of(with_push({"/push/scheme": "http"})) with data.writ.config.callbacks as callbacks
	expect(decision.denials, [{
		"code": "CALLBACK_NOT_ALLOWED",
		"reason": "callback scheme http is not allowed for host agents.bank.ae; use https",
	}])
}

test_http_to_a_listed_host_passes if {
	expect(codes(with_push({"/push/scheme": "http"})), []) with data.writ.config.callbacks as object.union(callbacks, {"allow_http_hosts": ["agents.bank.ae"]})
}

test_listed_http_host_still_needs_http_or_https if {
	expect(codes(with_push({"/push/scheme": "ftp"})), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config.callbacks as object.union(callbacks, {"allow_http_hosts": ["agents.bank.ae"]})
}

test_missing_token_is_denied if {
	decision := decision_of(with_push({"/push/has_token": false})) with data.writ.config.callbacks as callbacks
	expect(decision.denials, [{
		"code": "CALLBACK_UNAUTHENTICATED",
		"reason": "the callback to agents.bank.ae carries no token",
	}])
}

test_all_three_failures_together if {
	request := with_push({"/push/host": "evil.example", "/push/scheme": "http", "/push/has_token": false})
	expect(codes(request), ["CALLBACK_NOT_ALLOWED", "CALLBACK_NOT_ALLOWED", "CALLBACK_UNAUTHENTICATED"]) with data.writ.config.callbacks as callbacks
}

# The undefined cases: a missing field must deny, never slip through.
test_push_without_host_is_denied if {
	expect(codes(json.patch(with_push({}), [{"op": "remove", "path": "/push/host"}])), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config.callbacks as callbacks
}

test_push_without_scheme_is_denied if {
	expect(codes(json.patch(with_push({}), [{"op": "remove", "path": "/push/scheme"}])), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config.callbacks as callbacks
}

test_push_without_has_token_is_denied if {
	expect(codes(json.patch(with_push({}), [{"op": "remove", "path": "/push/has_token"}])), ["CALLBACK_UNAUTHENTICATED"]) with data.writ.config.callbacks as callbacks
	expect(codes(with_push({"/push/has_token": "yes"})), ["CALLBACK_UNAUTHENTICATED"]) with data.writ.config.callbacks as callbacks
}

test_empty_push_is_denied if {
	expect(codes(with_push({"/push": {}})), ["CALLBACK_NOT_ALLOWED", "CALLBACK_NOT_ALLOWED", "CALLBACK_UNAUTHENTICATED"])
}

test_missing_callbacks_config_is_denied if {
	request := with_push({})
	expect(codes(request), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config as object.remove(data.writ.config, ["callbacks"])
}

test_push_config_set_is_checked if {
	request := with_push({"/operation": "push_config.set", "/push/host": "evil.example"})
	expect(codes(request), ["CALLBACK_NOT_ALLOWED"]) with data.writ.config.callbacks as callbacks
}

test_callbacks_out_of_range_are_refused if {
	cases := {
		"a list": {"data.writ.config.callbacks is [\"agents.bank.ae\"]; it must be an object of targets (agent name -> hosts), tenants (tenant -> hosts), allow_http_hosts (hosts), each possibly empty or left out; a host is an exact name or address in lower case"},
		"a misspelt key": {"data.writ.config.callbacks.target is not a key of callbacks (targets, tenants, allow_http_hosts)"},
		"targets a list": {"data.writ.config.callbacks.targets is [\"agents.bank.ae\"]; it must be an object of names to lists of hosts"},
		"an upper-case host": {"data.writ.config.callbacks.tenants[wholesale] is [\"Agents.bank.ae\"]; it must be a list of hosts, each an exact name or address in lower case"},
		"a wildcard": {"data.writ.config.callbacks.targets[a] is [\"*.bank.ae\"]; it must be a list of hosts, each an exact name or address in lower case"},
		"a URL": {"data.writ.config.callbacks.allow_http_hosts is [\"http://agents.bank.ae\"]; it must be a list of hosts, each an exact name or address in lower case"},
	}
	values := {
		"a list": ["agents.bank.ae"],
		"a misspelt key": {"target": {}},
		"targets a list": {"targets": ["agents.bank.ae"]},
		"an upper-case host": {"tenants": {"wholesale": ["Agents.bank.ae"]}},
		"a wildcard": {"targets": {"a": ["*.bank.ae"]}},
		"a URL": {"allow_http_hosts": ["http://agents.bank.ae"]},
	}
	every name, want in cases {
		expect(limit_errors_for("callbacks", config_with("callbacks", values[name])), want)
	}
	expect(limit_errors_for("callbacks", config_with("callbacks", {"targets": {"a": ["10.0.0.1", "fd00::1", "hooks.bank.ae"]}})), set())
	expect(limit_errors_for("callbacks", object.remove(data.writ.config, ["callbacks"])), set())
}
