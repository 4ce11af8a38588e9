# UNAUTHENTICATED: the caller must have proven who it is.
#
# writ verifies tokens and certificates before the policy runs and records the
# outcome in input.caller.authenticated. Only the exact value true passes; a
# missing caller, a missing flag or any other value is denied.
#
# Tuned by: nothing in data.
package writ.authz

authenticated if input.caller.authenticated == true

denials contains {
	"code": "UNAUTHENTICATED",
	"reason": "the caller is not authenticated",
} if not authenticated
