# Shared helpers used by every check. Nothing here denies on its own.
#
# op: the operation being authorized. An operation writ does not recognise, or a
#     request with no operation at all, is judged as "send", the strictest one,
#     so a malformed request is never treated more leniently than a delegation.
# shown(path): the input value at path, or "(missing)", for writing reasons.
#     A reason must never be undefined: an undefined reason would silently drop
#     its denial and let the request through.
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

shown(path) := object.get(input, path, "(missing)")
