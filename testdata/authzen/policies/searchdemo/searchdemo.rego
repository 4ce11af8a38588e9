# The AuthZEN search interop ("Search API Demo"), as an AuthZEN application
# of writ: written from the scenario's description (openid/authzen, interop
# "search"). Six users with a role and a department, twenty records with a
# department and an owner (data.json), three actions:
#
#   view    the owner, anyone of the record's department, any manager
#   edit    the owner, a manager of the record's department
#   delete  the owner
#
# Searches list every user, record and action as candidates; writ keeps
# those the decision permits.
package searchdemo

default decision := false

decision if allowed

user := data.searchdemo.users[input.subject.id]

record := data.searchdemo.records[input.resource.id]

owner if record.owner == input.subject.id

same_department if record.department == user.department

manager if user.role == "manager"

allowed if {
	input.action.name == "view"
	owner
}

allowed if {
	input.action.name == "view"
	same_department
}

allowed if {
	input.action.name == "view"
	record
	manager
}

allowed if {
	input.action.name == "edit"
	owner
}

allowed if {
	input.action.name == "edit"
	manager
	same_department
}

allowed if {
	input.action.name == "delete"
	owner
}

subjects contains {"type": "user", "id": id} if some id, _ in data.searchdemo.users

resources contains {"type": "record", "id": id} if some id, _ in data.searchdemo.records

actions contains {"name": name} if some name in ["view", "edit", "delete"]
