# CLASSIFICATION_EXCEEDED: data may only go to an agent cleared to handle it.
#
# Levels are ranked by their position in classification_order (lowest first).
# A send, stream, card or discover is denied when the task's
# data_classification ranks above the target's max_data_classification, or
# when either level is missing or not in the list (each with its own reason).
#
# Tuned by: data.writ.config.classification_order: the levels writ knows,
#           lowest first (public, internal, confidential, restricted), ending
#           at any of them (shipped: all four). A level left off the end is
#           unknown, so a task at that level goes nowhere and a target
#           cleared for it is denied. A request or a configuration can name
#           no other level, so there is no other to add.
package writ.authz

default classification_order := []

classification_order := data.writ.config.classification_order

rank := {level: i | some i, level in classification_order}

classification_applies if op in {"send", "stream", "card", "discover"}

task_level_known if input.task.data_classification in classification_order

target_level_known if input.target.max_data_classification in classification_order

denials contains {
	"code": "CLASSIFICATION_EXCEEDED",
	"reason": sprintf("the task's data classification %v is not one of %v", [
		shown(["task", "data_classification"]),
		classification_order,
	]),
} if {
	classification_applies
	not task_level_known
}

denials contains {
	"code": "CLASSIFICATION_EXCEEDED",
	"reason": sprintf("%v's max data classification %v is not one of %v", [
		shown(["target", "name"]),
		shown(["target", "max_data_classification"]),
		classification_order,
	]),
} if {
	classification_applies
	not target_level_known
}

denials contains {
	"code": "CLASSIFICATION_EXCEEDED",
	"reason": sprintf("%v handles up to %v; the task carries %v", [
		shown(["target", "name"]),
		input.target.max_data_classification,
		input.task.data_classification,
	]),
} if {
	classification_applies
	rank[input.task.data_classification] > rank[input.target.max_data_classification]
}

# The levels writ knows (task.Level), lowest first.
known_levels := ["public", "internal", "confidential", "restricted"]

limits["classification_order"] := {
	"range": "public, internal, confidential, restricted, in that order, ending at any of them",
	"ends": [array.slice(known_levels, 0, 1), known_levels],
}

classification_order_in_range if {
	is_array(classification_order)
	count(classification_order) > 0
	classification_order == array.slice(known_levels, 0, count(classification_order))
}

limit_errors contains limit_error("classification_order") if not classification_order_in_range
