# NO_ACCEPTABLE_AUTH: caller and target must meet on an accepted auth scheme.
#
# input.target.security_schemes lists how the target lets callers authenticate
# (oauth2, openidconnect, http, apikey, mtls). For an authenticated caller, on
# every operation, the request is denied when:
#   - none of the target's schemes is in accepted_auth_schemes, or
#   - the way the caller authenticated (input.caller.method: jwt, mtls, static)
#     fits none of the target's accepted schemes, per auth_methods.
#
# Tuned by: data.writ.config.accepted_auth_schemes: one or more of oauth2,
#           openidconnect, http, apikey, mtls, each once (shipped: oauth2,
#           openidconnect, mtls).
#           data.writ.config.auth_methods: scheme -> the caller methods it
#           accepts, for every accepted scheme one or more of those it can
#           carry: oauth2 and openidconnect jwt; http jwt and static; apikey
#           static; mtls mtls (shipped: all of them). A method a scheme
#           cannot carry (mtls for a jwt, say) is refused at load.
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

# The caller methods each scheme kind can carry: the widest auth_methods.
scheme_methods := {
	"oauth2": ["jwt"],
	"openidconnect": ["jwt"],
	"http": ["jwt", "static"],
	"apikey": ["static"],
	"mtls": ["mtls"],
}

limits["accepted_auth_schemes"] := {
	"range": "one or more of oauth2, openidconnect, http, apikey, mtls, each once",
	"ends": [["apikey"], ["oauth2", "openidconnect", "http", "apikey", "mtls"]],
}

limits["auth_methods"] := {
	"range": "for every accepted scheme, one or more of the caller methods it can carry (oauth2, openidconnect: jwt; http: jwt, static; apikey: static; mtls: mtls)",
	"ends": [object.union(scheme_methods, {"http": ["jwt"]}), scheme_methods],
}

accepted_schemes_in_range if {
	is_array(accepted_auth_schemes)
	count(accepted_auth_schemes) > 0
	count({s | some s in accepted_auth_schemes}) == count(accepted_auth_schemes)
	every scheme in accepted_auth_schemes {
		scheme_methods[scheme]
	}
}

limit_errors contains limit_error("accepted_auth_schemes") if not accepted_schemes_in_range

# A scheme's methods: a non-empty list of what the scheme can carry.
methods_in_range(scheme, methods) if {
	is_array(methods)
	count(methods) > 0
	every method in methods {
		method in scheme_methods[scheme]
	}
}

auth_methods_in_range if {
	is_object(data.writ.config.auth_methods)
	every scheme, methods in data.writ.config.auth_methods {
		methods_in_range(scheme, methods)
	}
	every scheme in known_accepted_schemes {
		data.writ.config.auth_methods[scheme]
	}
}

# The accepted schemes of a kind writ knows (an unknown one is an error of
# accepted_auth_schemes, not of auth_methods).
known_accepted_schemes contains scheme if {
	some scheme in accepted_auth_schemes
	scheme_methods[scheme]
}

limit_errors contains limit_error("auth_methods") if not auth_methods_in_range
