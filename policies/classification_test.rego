package writ.authz_test

import data.writ.authz

shipped_order := ["public", "internal", "confidential", "restricted"]

leveled(task, target) := with_fields({"/task/data_classification": task, "/target/max_data_classification": target})

# Every pair of levels in the order, as [i, j] positions, lower first.
level_pairs := [[i, j] | some i, _ in authz.classification_order; some j, _ in authz.classification_order; i < j]

test_equal_levels_pass if {
	expect([level | some level in authz.classification_order; codes(leveled(level, level)) != []], [])
}

test_lower_task_level_passes if {
	expect([pair | some pair in level_pairs; codes(leveled(authz.classification_order[pair[0]], authz.classification_order[pair[1]])) != []], [])
}

test_higher_task_level_is_denied if {
	expect([pair | some pair in level_pairs; codes(leveled(authz.classification_order[pair[1]], authz.classification_order[pair[0]])) != ["CLASSIFICATION_EXCEEDED"]], [])
}

test_one_level_above_is_denied if {
	decision := decision_of(leveled("restricted", "confidential")) with data.writ.config.classification_order as shipped_order
	expect(decision.denials, [{
		"code": "CLASSIFICATION_EXCEEDED",
		"reason": "sanctions-screening-agent handles up to confidential; the task carries restricted",
	}])
}

test_unknown_task_level_is_denied if {
	decision := decision_of(leveled("secret", "restricted")) with data.writ.config.classification_order as shipped_order
	expect(decision.denials, [{
		"code": "CLASSIFICATION_EXCEEDED",
		"reason": "the task's data classification secret is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]",
	}])
}

test_unknown_target_level_is_denied if {
	decision := decision_of(leveled("restricted", "top")) with data.writ.config.classification_order as shipped_order
	expect(decision.denials, [{
		"code": "CLASSIFICATION_EXCEEDED",
		"reason": "sanctions-screening-agent's max data classification top is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]",
	}])
}

test_a_level_left_off_the_order_is_unknown if {
	expect(codes(leveled("restricted", "restricted")), ["CLASSIFICATION_EXCEEDED", "CLASSIFICATION_EXCEEDED"]) with data.writ.config.classification_order as ["public", "internal"]
	expect(codes(leveled("internal", "restricted")), ["CLASSIFICATION_EXCEEDED"]) with data.writ.config.classification_order as ["public", "internal"]
	expect(codes(leveled("internal", "internal")), []) with data.writ.config.classification_order as ["public", "internal"]
}

test_missing_levels_are_denied if {
	expect(codes(without_field("/task/data_classification")), ["CLASSIFICATION_EXCEEDED"])
	expect(codes(without_field("/target/max_data_classification")), ["CLASSIFICATION_EXCEEDED"])
	expect(codes(without_field("/task")), ["CLASSIFICATION_EXCEEDED"])
}

test_missing_order_denies_everything if {
	request := valid_request
	config := object.remove(data.writ.config, ["classification_order"])
	expect(codes(request), ["CLASSIFICATION_EXCEEDED", "CLASSIFICATION_EXCEEDED"]) with data.writ.config as config
}

test_card_and_discover_are_checked if {
	every operation in ["stream", "card", "discover"] {
		request := object.union(leveled("restricted", "internal"), {"operation": operation})
		expect(codes(request), ["CLASSIFICATION_EXCEEDED"]) with data.writ.config.classification_order as shipped_order
	}
}

test_other_operations_are_not_checked if {
	expect(codes(object.union(leveled("restricted", "internal"), {"operation": "get"})), []) with data.writ.config.classification_order as shipped_order
}

test_order_out_of_range_is_refused if {
	every order in [[], ["internal", "restricted"], ["restricted", "public"], ["public", "secret"], "public", ["public", "public"]] {
		expect(limit_errors_for("classification_order", config_with("classification_order", order)), {sprintf("data.writ.config.classification_order is %v; it must be public, internal, confidential, restricted, in that order, ending at any of them", [order])})
	}
	expect(limit_errors_for("classification_order", object.remove(data.writ.config, ["classification_order"])), {"data.writ.config.classification_order is (missing); it must be public, internal, confidential, restricted, in that order, ending at any of them"})
}
