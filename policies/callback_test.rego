package writ.authz_test

import data.writ.authz

test_no_push_config_is_not_checked if {
	codes(without_field("/push")) == []
}

test_allowed_host_passes if {
	codes(valid_request) == []
}

test_host_allowed_for_the_tenant_only_passes if {
	codes(valid_request) == [] with data.writ.config.callbacks.targets as {}
}

test_host_allowed_for_the_target_only_passes if {
	codes(valid_request) == [] with data.writ.config.callbacks.tenants as {}
}

test_host_not_listed_is_denied if {
	decision := authz.decision with input as with_field("/push/host", "evil.example")
	decision.denials == [{
		"code": "CALLBACK_NOT_ALLOWED",
		"reason": "callback host evil.example is not allowed for target sanctions-screening-agent or tenant wholesale",
	}]
}

test_host_must_match_exactly if {
	codes(with_field("/push/host", "x.agents.bank.ae")) == ["CALLBACK_NOT_ALLOWED"]
	codes(with_field("/push/host", "AGENTS.BANK.AE")) == ["CALLBACK_NOT_ALLOWED"]
}

test_http_scheme_is_denied if {
	decision := authz.decision with input as with_field("/push/scheme", "http")
	decision.denials == [{
		"code": "CALLBACK_NOT_ALLOWED",
		"reason": "callback scheme http is not allowed for host agents.bank.ae; use https",
	}]
}

test_http_to_a_listed_host_passes if {
	codes(with_field("/push/scheme", "http")) == [] with data.writ.config.callbacks.allow_http_hosts as ["agents.bank.ae"]
}

test_listed_http_host_still_needs_http_or_https if {
	codes(with_field("/push/scheme", "ftp")) == ["CALLBACK_NOT_ALLOWED"] with data.writ.config.callbacks.allow_http_hosts as ["agents.bank.ae"]
}

test_missing_token_is_denied if {
	decision := authz.decision with input as with_field("/push/has_token", false)
	decision.denials == [{
		"code": "CALLBACK_UNAUTHENTICATED",
		"reason": "the callback to agents.bank.ae carries no token",
	}]
}

test_all_three_failures_together if {
	request := with_fields({"/push/host": "evil.example", "/push/scheme": "http", "/push/has_token": false})
	codes(request) == ["CALLBACK_NOT_ALLOWED", "CALLBACK_NOT_ALLOWED", "CALLBACK_UNAUTHENTICATED"]
}

# The undefined cases: a missing field must deny, never slip through.
test_push_without_host_is_denied if {
	codes(without_field("/push/host")) == ["CALLBACK_NOT_ALLOWED"]
}

test_push_without_scheme_is_denied if {
	codes(without_field("/push/scheme")) == ["CALLBACK_NOT_ALLOWED"]
}

test_push_without_has_token_is_denied if {
	codes(without_field("/push/has_token")) == ["CALLBACK_UNAUTHENTICATED"]
	codes(with_field("/push/has_token", "yes")) == ["CALLBACK_UNAUTHENTICATED"]
}

test_empty_push_is_denied if {
	codes(with_field("/push", {})) == ["CALLBACK_NOT_ALLOWED", "CALLBACK_NOT_ALLOWED", "CALLBACK_UNAUTHENTICATED"]
}

test_missing_callbacks_config_is_denied if {
	codes(valid_request) == ["CALLBACK_NOT_ALLOWED"] with data.writ.config as object.remove(data.writ.config, ["callbacks"])
}

test_push_config_set_is_checked if {
	request := with_fields({"/operation": "push_config.set", "/push/host": "evil.example"})
	codes(request) == ["CALLBACK_NOT_ALLOWED"]
}
