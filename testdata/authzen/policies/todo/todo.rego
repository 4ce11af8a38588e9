# The AuthZEN interop Todo application, as an AuthZEN application of writ
# (authzen.applications: {name: todo, package: todo}). Written from the
# scenario's description (openid/authzen, interop "Todo 1.0"): five actions,
# four roles, five users. Users and the permissions of each role are data
# (data.json), keyed by the users' PIDs.
#
#   viewer       reads users and the todo list
#   editor       viewer + creates todos, updates and deletes its own
#   admin        editor + deletes any todo
#   evil_genius  editor + updates any todo
#
# The subject is a PID (subject.id), or, in the earliest payloads, the
# user's email with the PID beside it. A todo's owner is
# resource.properties.ownerID (earliest payloads: resource.ownerID).
package todo

default decision := false

decision if allowed

# The subject's user record: by PID, else by email.
user := u if {
	u := data.todo.users[input.subject.id]
} else := u if {
	some u in data.todo.users
	u.id == input.subject.id
}

permitted(p) if {
	some role in user.roles
	p in data.todo.roles[role]
}

owner := o if {
	o := input.resource.properties.ownerID
} else := o if {
	o := input.resource.ownerID
}

own if owner == user.id

allowed if {
	input.action.name in {"can_read_user", "can_read_todos", "can_create_todo"}
	permitted(input.action.name)
}

allowed if {
	input.action.name == "can_update_todo"
	permitted("update_any_todo")
}

allowed if {
	input.action.name == "can_update_todo"
	permitted("update_own_todo")
	own
}

allowed if {
	input.action.name == "can_delete_todo"
	permitted("delete_any_todo")
}

allowed if {
	input.action.name == "can_delete_todo"
	permitted("delete_own_todo")
	own
}
