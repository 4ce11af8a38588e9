package writ.authz_test

test_authenticated_caller_passes if {
	expect(codes(valid_request), [])
}

test_unauthenticated_caller_is_denied if {
	expect(codes(with_field("/caller/authenticated", false)), ["UNAUTHENTICATED"])
}

test_missing_authenticated_flag_is_denied if {
	expect(codes(without_field("/caller/authenticated")), ["UNAUTHENTICATED"])
}

test_authenticated_must_be_exactly_true if {
	expect(codes(with_field("/caller/authenticated", "true")), ["UNAUTHENTICATED"])
	expect(codes(with_field("/caller/authenticated", 1)), ["UNAUTHENTICATED"])
}

test_missing_caller_is_denied if {
	"UNAUTHENTICATED" in codes(without_field("/caller"))
}

# An empty input is a send by nobody of nothing to no one.
test_empty_input_is_denied if {
	decision := decision_of({})
	expect(decision.allow, false)
	expect(codes({}), [
		"CLASSIFICATION_EXCEEDED", "CLASSIFICATION_EXCEEDED", "CYCLE_DETECTED",
		"TENANT_NOT_PERMITTED", "UNAUTHENTICATED",
	])
}

test_reason if {
	decision := decision_of(with_field("/caller/authenticated", false))
	expect(decision.denials, [{"code": "UNAUTHENTICATED", "reason": "the caller is not authenticated"}])
}
