# NOT_TASK_OWNER: only the task's owner may follow up on it.
#
# Follow-up operations are get, cancel, subscribe, every push_config.*, and a
# send or stream that names an existing task (non-empty task.id). When writ
# has a record of the task (input.task.owner is present), the caller must own
# it. When there is no record, this policy does not decide ownership.
#
# Ownership modes (an identity must be non-empty to match):
#   "agent"  same tenant and same agent_id (the default)
#   "tenant" same tenant
#   "user"   same tenant and same user_id
# Any other mode denies every follow-up (and is refused at load).
#
# Tuned by: data.writ.config.ownership: agent, tenant or user (agent if not set).
package writ.authz

default ownership_mode := "agent"

ownership_mode := data.writ.config.ownership

new_task if input.task.id == ""

follow_up if op in {
	"get", "cancel", "subscribe",
	"push_config.set", "push_config.get", "push_config.list", "push_config.delete",
}

follow_up if {
	op in {"send", "stream"}
	not new_task
}

task_has_owner if input.task.owner

same_as_owner(field) if {
	value := input.caller[field]
	is_string(value)
	value != ""
	value == input.task.owner[field]
}

owns_task if {
	ownership_mode == "tenant"
	same_as_owner("tenant")
}

owns_task if {
	ownership_mode == "agent"
	same_as_owner("tenant")
	same_as_owner("agent_id")
}

owns_task if {
	ownership_mode == "user"
	same_as_owner("tenant")
	same_as_owner("user_id")
}

denials contains {
	"code": "NOT_TASK_OWNER",
	"reason": sprintf("task %v belongs to agent %v, user %v in tenant %v; the caller is agent %v, user %v in tenant %v (ownership mode %v)", [
		shown(["task", "id"]),
		shown(["task", "owner", "agent_id"]),
		shown(["task", "owner", "user_id"]),
		shown(["task", "owner", "tenant"]),
		shown(["caller", "agent_id"]),
		shown(["caller", "user_id"]),
		shown(["caller", "tenant"]),
		ownership_mode,
	]),
} if {
	follow_up
	task_has_owner
	not owns_task
}

limits["ownership"] := {"range": "agent, tenant or user", "ends": ["agent", "tenant", "user"]}

limit_errors contains limit_error("ownership") if not ownership_mode in limits.ownership.ends
