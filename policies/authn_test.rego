package writ.authz_test

import data.writ.authz

test_authenticated_caller_passes if {
	codes(valid_request) == []
}

test_unauthenticated_caller_is_denied if {
	codes(with_field("/caller/authenticated", false)) == ["UNAUTHENTICATED"]
}

test_missing_authenticated_flag_is_denied if {
	codes(without_field("/caller/authenticated")) == ["UNAUTHENTICATED"]
}

test_authenticated_must_be_exactly_true if {
	codes(with_field("/caller/authenticated", "true")) == ["UNAUTHENTICATED"]
	codes(with_field("/caller/authenticated", 1)) == ["UNAUTHENTICATED"]
}

test_missing_caller_is_denied if {
	"UNAUTHENTICATED" in codes(without_field("/caller"))
}

test_empty_input_is_denied if {
	decision := authz.decision with input as {}
	decision.allow == false
	codes({}) == [
		"CLASSIFICATION_EXCEEDED", "CLASSIFICATION_EXCEEDED", "CYCLE_DETECTED",
		"TENANT_NOT_PERMITTED", "UNAUTHENTICATED",
	]
}

test_reason if {
	decision := authz.decision with input as with_field("/caller/authenticated", false)
	decision.denials == [{"code": "UNAUTHENTICATED", "reason": "the caller is not authenticated"}]
}
