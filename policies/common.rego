# Shared helpers used by every check. Nothing here denies on its own.
#
# op: the operation being authorized. An operation writ does not recognise, or a
#     request with no operation at all, is judged as "send", the strictest one,
#     so a malformed request is never treated more leniently than a delegation.
# shown(path): the input value at path, or "(missing)", for writing reasons.
#     A reason must never be undefined: an undefined reason would silently drop
#     its denial and let the request through.
#
# Limits: every key of data.writ.config has a documented range, published by
# the check that reads it as limits[key] = {"range": what it may be, "ends":
# the least and the most it may say (for a choice, every choice)}.
# limit_errors holds a message for every key outside its range, and for every
# key no check reads (a misspelt key would otherwise be ignored silently);
# test_data_is_within_its_documented_range fails on any of them, so a reload
# of such data is refused. Any data inside the ranges keeps every shipped
# test green: policies/limits_test.go runs them at every end.
#
# Tuned by: nothing in data.
package writ.authz

known_operations := {
	"send", "stream", "get", "list", "cancel", "subscribe",
	"push_config.set", "push_config.get", "push_config.list", "push_config.delete",
	"card", "card.extended", "discover",
}

default op := "send"

op := input.operation if input.operation in known_operations

# Operations that start or continue a delegation to the target agent.
delegating if op in {"send", "stream"}

# On egress every call is a hop of the delegation, whatever its operation:
# writ obtains a token for it whose act chain is the caller's grown by this
# agent, and sends it to the target. A card fetch or a get that would close
# a cycle or exceed the depth must not leave the host either.
delegating if input.direction == "egress"

shown(path) := object.get(input, path, "(missing)")

# The message for a limit of data.writ.config outside its range.
limit_error(key) := sprintf("data.writ.config.%v is %v; it must be %v", [
	key,
	object.get(data.writ.config, key, "(missing)"),
	limits[key].range,
])

limit_errors contains sprintf("data.writ.config.%v is not a limit of this policy (its limits are %v)", [key, sort(object.keys(limits))]) if {
	some key, _ in data.writ.config
	not limits[key]
}
