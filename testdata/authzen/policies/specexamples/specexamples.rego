# The entities of the examples in the AuthZEN Authorization API 1.0
# specification (openid/authzen api/authorization-api-1_0.md, sections 6 to
# 10), as an AuthZEN application of writ: who may do what to each resource
# is data (data.json: entities, type → id → action → subjects), chosen so that every
# example response the specification shows is the answer. A document that
# does not exist is denied with the error context of the evaluations
# example; an edit by one who may only read, with its reason.
package specexamples

default decision := false

entry := data.specexamples.entities[input.resource.type][input.resource.id]

permitted if input.subject.id in entry[input.action.name]

decision := true if permitted

decision := {"decision": false, "context": {"error": {"status": 404, "message": "Resource not found"}}} if {
	input.resource.type == "document"
	not entry
}

decision := {"decision": false, "context": {"reason": "Subject is a viewer of the resource"}} if {
	not permitted
	input.subject.id in entry.can_read
}

subjects contains {"type": "user", "id": id} if some id in data.specexamples.users

resources contains {"type": t, "id": id} if {
	some t, ids in data.specexamples.entities
	some id, _ in ids
}

actions contains {"name": name} if {
	some ids in data.specexamples.entities
	some actions in ids
	some name, _ in actions
}
