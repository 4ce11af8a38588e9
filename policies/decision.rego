# The decision writ enforces: data.writ.authz.decision
#
#   {"allow": true/false, "denials": [{"code": ..., "reason": ...}, ...]}
#
# Every check file adds its failures to the set `denials`. The request is
# allowed exactly when that set is empty; the caller sees every denial, sorted
# by code and then by reason. The decision is always defined: an empty or
# malformed input is denied (at least UNAUTHENTICATED).
#
# To add a check: create a new file in package writ.authz with a rule
# `denials contains {"code": ..., "reason": ...} if { ... }`.
#
# Tuned by: nothing in data.
package writ.authz

# Objects compare key by key in alphabetical order, so this sorts by code,
# then by reason.
decision := {
	"allow": count(denials) == 0,
	"denials": sort(denials),
}
