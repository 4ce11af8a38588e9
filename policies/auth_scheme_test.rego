package writ.authz_test

import data.writ.authz

test_jwt_caller_to_oauth2_target_passes if {
	codes(with_field("/target/security_schemes", ["oauth2"])) == []
	codes(with_field("/target/security_schemes", ["openidconnect"])) == []
}

test_mtls_caller_to_mtls_target_passes if {
	codes(with_fields({"/caller/method": "mtls", "/target/security_schemes": ["mtls"]})) == []
	codes(with_field("/caller/method", "mtls")) == []
}

test_target_without_accepted_scheme_is_denied if {
	decision := authz.decision with input as with_field("/target/security_schemes", ["apikey"])
	decision.denials == [{
		"code": "NO_ACCEPTABLE_AUTH",
		"reason": "sanctions-screening-agent offers only [\"apikey\"]; writ accepts [\"oauth2\", \"openidconnect\", \"mtls\"]",
	}]
}

test_target_without_schemes_is_denied if {
	codes(with_field("/target/security_schemes", [])) == ["NO_ACCEPTABLE_AUTH"]
	codes(without_field("/target/security_schemes")) == ["NO_ACCEPTABLE_AUTH"]
}

test_caller_method_not_accepted_is_denied if {
	decision := authz.decision with input as with_field("/target/security_schemes", ["mtls"])
	decision.denials == [{
		"code": "NO_ACCEPTABLE_AUTH",
		"reason": "the caller authenticated with jwt, which none of sanctions-screening-agent's schemes [\"mtls\"] accepts",
	}]
}

test_caller_method_must_fit_an_accepted_scheme if {
	# http would take a jwt, but writ does not accept http; mtls is accepted but needs mtls.
	codes(with_field("/target/security_schemes", ["http", "mtls"])) == ["NO_ACCEPTABLE_AUTH"]
	codes(with_fields({"/caller/method": "static", "/target/security_schemes": ["oauth2", "apikey"]})) == ["NO_ACCEPTABLE_AUTH"]
}

test_missing_caller_method_is_denied if {
	codes(without_field("/caller/method")) == ["NO_ACCEPTABLE_AUTH"]
}

test_missing_config_is_denied if {
	codes(valid_request) == ["NO_ACCEPTABLE_AUTH"] with data.writ.config as object.remove(data.writ.config, ["accepted_auth_schemes"])
	codes(valid_request) == ["NO_ACCEPTABLE_AUTH"] with data.writ.config as object.remove(data.writ.config, ["auth_methods"])
}

test_unauthenticated_caller_gets_only_unauthenticated if {
	request := with_fields({"/caller/authenticated": false, "/target/security_schemes": ["apikey"]})
	codes(request) == ["UNAUTHENTICATED"]
}

test_every_operation_is_checked if {
	codes(with_fields({"/operation": "card", "/target/security_schemes": ["apikey"]})) == ["NO_ACCEPTABLE_AUTH"]
}
