# The fixture of the AuthZEN Authorization API 1.0 certification scenario
# (openid/authzen certification/authorization-api-1_0-scenario.md, "Required
# Fixture"), as an AuthZEN application of writ. Subjects alice and bob (bob
# with role admin), records record-1 (active) and record-2 (archived),
# actions read, write and delete (delete with a soft property):
#
#   read    any fixture user, any fixture record
#   write   a subject whose properties say role admin, any record; an
#           editor (alice), a record that is not archived
#   delete  an editor, soft deletes only, of a record that is not archived
#
# A record's status is resource.properties.status when the request gives
# it, else the fixture's. Searches list the fixture's entities as
# candidates (bob with his role, so that he is found as an admin).
package certification

default decision := false

decision if allowed

known_user if input.subject.id in {s.id | some s in data.certification.fixture_subjects}

fixture_record := r if {
	some r in data.certification.fixture_resources
	r.id == input.resource.id
}

status := s if {
	s := input.resource.properties.status
} else := s if {
	s := fixture_record.properties.status
}

admin if input.subject.properties.role == "admin"

editor if input.subject.id in data.certification.editors

writable if {
	status
	status != "archived"
}

allowed if {
	input.action.name == "read"
	known_user
	fixture_record
}

allowed if {
	input.action.name == "write"
	admin
}

allowed if {
	input.action.name == "write"
	editor
	writable
}

allowed if {
	input.action.name == "delete"
	editor
	writable
	input.action.properties.soft == true
}

subjects := data.certification.fixture_subjects

resources := data.certification.fixture_resources

actions contains {"name": name} if some name in data.certification.fixture_actions
