package writ.authz_test

import data.writ.authz

# A caller that authenticated by method to a target offering schemes.
meeting(method, schemes) := with_fields({"/caller/method": method, "/target/security_schemes": schemes})

# Every accepted scheme with every method it accepts, as [scheme, method].
accepted_pairs := [[scheme, method] | some scheme in authz.accepted_auth_schemes; some method in data.writ.config.auth_methods[scheme]]

test_every_accepted_scheme_admits_its_methods if {
	expect([pair | some pair in accepted_pairs; codes(meeting(pair[1], [pair[0]])) != []], [])
}

test_a_method_a_scheme_does_not_accept_is_denied if {
	refused := [[scheme, method] |
		some scheme in authz.accepted_auth_schemes
		some method in ["jwt", "mtls", "static"]
		not method in data.writ.config.auth_methods[scheme]
		codes(meeting(method, [scheme])) != ["NO_ACCEPTABLE_AUTH"]
	]
	expect(refused, [])
}

test_a_scheme_writ_does_not_accept_is_denied if {
	refused := [scheme |
		some scheme, methods in authz.scheme_methods
		not scheme in authz.accepted_auth_schemes
		codes(meeting(methods[0], [scheme])) != ["NO_ACCEPTABLE_AUTH"]
	]
	expect(refused, [])
}

test_jwt_caller_to_oauth2_target_passes if {
	expect(codes(meeting("jwt", ["oauth2"])), []) with data.writ.config as fixture_config
	expect(codes(meeting("jwt", ["openidconnect"])), []) with data.writ.config as fixture_config
}

test_mtls_caller_to_mtls_target_passes if {
	expect(codes(meeting("mtls", ["mtls"])), []) with data.writ.config as fixture_config
	expect(codes(meeting("mtls", ["oauth2", "mtls"])), []) with data.writ.config as fixture_config
}

test_target_without_accepted_scheme_is_denied if {
	decision := decision_of(meeting("jwt", ["apikey"])) with data.writ.config as fixture_config
	expect(decision.denials, [{
		"code": "NO_ACCEPTABLE_AUTH",
		"reason": "sanctions-screening-agent offers only [\"apikey\"]; writ accepts [\"oauth2\", \"openidconnect\", \"mtls\"]",
	}])
}

test_target_without_schemes_is_denied if {
	expect(codes(with_field("/target/security_schemes", [])), ["NO_ACCEPTABLE_AUTH"])
	expect(codes(without_field("/target/security_schemes")), ["NO_ACCEPTABLE_AUTH"])
}

test_caller_method_not_accepted_is_denied if {
	decision := decision_of(meeting("jwt", ["mtls"])) with data.writ.config as fixture_config
	expect(decision.denials, [{
		"code": "NO_ACCEPTABLE_AUTH",
		"reason": "the caller authenticated with jwt, which none of sanctions-screening-agent's schemes [\"mtls\"] accepts",
	}])
}

test_caller_method_must_fit_an_accepted_scheme if {
	# http would take a jwt, but writ does not accept http; mtls is accepted but needs mtls.
	expect(codes(meeting("jwt", ["http", "mtls"])), ["NO_ACCEPTABLE_AUTH"]) with data.writ.config as fixture_config
	expect(codes(meeting("static", ["oauth2", "apikey"])), ["NO_ACCEPTABLE_AUTH"]) with data.writ.config as fixture_config
}

test_missing_caller_method_is_denied if {
	expect(codes(without_field("/caller/method")), ["NO_ACCEPTABLE_AUTH"])
}

test_missing_config_is_denied if {
	request := valid_request
	expect(codes(request), ["NO_ACCEPTABLE_AUTH"]) with data.writ.config as object.remove(data.writ.config, ["accepted_auth_schemes"])
	expect(codes(request), ["NO_ACCEPTABLE_AUTH"]) with data.writ.config as object.remove(data.writ.config, ["auth_methods"])
}

test_unauthenticated_caller_gets_only_unauthenticated if {
	request := with_fields({"/caller/authenticated": false, "/target/security_schemes": ["apikey"]})
	expect(codes(request), ["UNAUTHENTICATED"]) with data.writ.config as fixture_config
}

test_every_operation_is_checked if {
	expect(codes(with_fields({"/operation": "card", "/target/security_schemes": []})), ["NO_ACCEPTABLE_AUTH"])
}

test_accepted_schemes_out_of_range_are_refused if {
	every schemes in [[], ["oauth2", "oauth2"], ["mtls", "kerberos"], "oauth2"] {
		expect(limit_errors_for("accepted_auth_schemes", config_with("accepted_auth_schemes", schemes)), {sprintf("data.writ.config.accepted_auth_schemes is %v; it must be one or more of oauth2, openidconnect, http, apikey, mtls, each once", [schemes])})
	}
}

test_auth_methods_out_of_range_are_refused if {
	every methods in [
		object.union(authz.scheme_methods, {"mtls": ["jwt"]}),
		object.union(authz.scheme_methods, {"oauth2": []}),
		object.union(authz.scheme_methods, {"kerberos": ["jwt"]}),
		object.remove(authz.scheme_methods, ["mtls"]),
		["jwt"],
	] {
		expect(limit_errors_for("auth_methods", object.union(config_with("auth_methods", methods), {"accepted_auth_schemes": ["mtls"]})), {sprintf("data.writ.config.auth_methods is %v; it must be for every accepted scheme, one or more of the caller methods it can carry (oauth2, openidconnect: jwt; http: jwt, static; apikey: static; mtls: mtls)", [methods])})
	}
}
