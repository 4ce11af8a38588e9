# NO_ACCEPTABLE_AUTH: caller and target must meet on an accepted auth scheme.
#
# input.target.security_schemes lists how the target lets callers authenticate
# (oauth2, openidconnect, http, apikey, mtls). For an authenticated caller, on
# every operation, the request is denied when:
#   - none of the target's schemes is in accepted_auth_schemes, or
#   - the way the caller authenticated (input.caller.method: jwt, mtls, static)
#     fits none of the target's accepted schemes, per auth_methods.
#
# Tuned by: data.writ.config.accepted_auth_schemes (shipped: oauth2, openidconnect, mtls)
#           data.writ.config.auth_methods (scheme -> caller methods it accepts)
package writ.authz

default accepted_auth_schemes := []

accepted_auth_schemes := data.writ.config.accepted_auth_schemes

# The target's schemes that writ accepts.
usable_schemes contains scheme if {
	some scheme in input.target.security_schemes
	scheme in accepted_auth_schemes
}

offers_accepted_scheme if count(usable_schemes) > 0

caller_method_fits if {
	some scheme in usable_schemes
	input.caller.method in data.writ.config.auth_methods[scheme]
}

denials contains {
	"code": "NO_ACCEPTABLE_AUTH",
	"reason": sprintf("%v offers only %v; writ accepts %v", [
		shown(["target", "name"]),
		shown(["target", "security_schemes"]),
		accepted_auth_schemes,
	]),
} if {
	authenticated
	not offers_accepted_scheme
}

denials contains {
	"code": "NO_ACCEPTABLE_AUTH",
	"reason": sprintf("the caller authenticated with %v, which none of %v's schemes %v accepts", [
		shown(["caller", "method"]),
		shown(["target", "name"]),
		shown(["target", "security_schemes"]),
	]),
} if {
	authenticated
	offers_accepted_scheme
	not caller_method_fits
}
