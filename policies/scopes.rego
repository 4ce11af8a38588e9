# SCOPE_MISSING: the caller's token must grant the scopes the operation needs.
#
# For an authenticated caller, the request is denied when input.caller.scopes
# lacks any scope that required_scopes lists for the operation; the reason
# names the missing ones. Operations not listed need no scope.
#
# Tuned by: data.writ.config.required_scopes: operation -> the scopes it
#           needs, any of the operations (common.rego) with a list of scope
#           names each, possibly empty; an operation not listed needs none, so
#           {} requires no scope at all. Shipped: send, stream, cancel and
#           push_config.set need "delegate". If the key is absent from data
#           the shipped values below apply. A key that is no operation (a
#           misspelt one would require nothing) is refused at load.
package writ.authz

default required_scopes := {
	"send": ["delegate"],
	"stream": ["delegate"],
	"cancel": ["delegate"],
	"push_config.set": ["delegate"],
}

required_scopes := data.writ.config.required_scopes

# The scopes the operation needs (none when it is not listed).
default op_scopes := []

op_scopes := required_scopes[op]

caller_has_scope(scope) if scope in input.caller.scopes

# Every required scope granted: with the operation known, partial evaluation
# unrolls this into one membership test per required scope.
has_required_scopes if {
	every scope in op_scopes {
		caller_has_scope(scope)
	}
}

missing_scopes contains scope if {
	some scope in op_scopes
	not caller_has_scope(scope)
}

denials contains {
	"code": "SCOPE_MISSING",
	"reason": sprintf("%v requires scopes %v; the caller's token lacks %v", [op, op_scopes, sort(missing_scopes)]),
} if {
	authenticated
	not has_required_scopes
}

limits["required_scopes"] := {
	"range": "an object from operations to lists of scope names (non-empty strings); an operation not listed needs none",
	"ends": [{}, {operation: ["delegate", "audit"] | some operation in known_operations}],
}

scope_names(scopes) if {
	is_array(scopes)
	every scope in scopes {
		is_string(scope)
		scope != ""
	}
}

required_scopes_in_range if {
	is_object(required_scopes)
	every operation, scopes in required_scopes {
		operation in known_operations
		scope_names(scopes)
	}
}

limit_errors contains limit_error("required_scopes") if not required_scopes_in_range
