package writ.authz_test

import data.writ.authz

test_equal_levels_pass if {
	codes(with_fields({"/task/data_classification": "confidential", "/target/max_data_classification": "confidential"})) == []
}

test_lower_task_level_passes if {
	codes(with_field("/task/data_classification", "public")) == []
}

test_one_level_above_is_denied if {
	decision := authz.decision with input as with_field("/target/max_data_classification", "confidential")
	decision.denials == [{
		"code": "CLASSIFICATION_EXCEEDED",
		"reason": "sanctions-screening-agent handles up to confidential; the task carries restricted",
	}]
}

test_unknown_task_level_is_denied if {
	decision := authz.decision with input as with_field("/task/data_classification", "secret")
	decision.denials == [{
		"code": "CLASSIFICATION_EXCEEDED",
		"reason": "the task's data classification secret is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]",
	}]
}

test_unknown_target_level_is_denied if {
	decision := authz.decision with input as with_field("/target/max_data_classification", "top")
	decision.denials == [{
		"code": "CLASSIFICATION_EXCEEDED",
		"reason": "sanctions-screening-agent's max data classification top is not one of [\"public\", \"internal\", \"confidential\", \"restricted\"]",
	}]
}

test_missing_levels_are_denied if {
	codes(without_field("/task/data_classification")) == ["CLASSIFICATION_EXCEEDED"]
	codes(without_field("/target/max_data_classification")) == ["CLASSIFICATION_EXCEEDED"]
	codes(without_field("/task")) == ["CLASSIFICATION_EXCEEDED"]
}

test_missing_order_denies_everything if {
	config := object.remove(data.writ.config, ["classification_order"])
	codes(valid_request) == ["CLASSIFICATION_EXCEEDED", "CLASSIFICATION_EXCEEDED"] with data.writ.config as config
}

test_card_and_discover_are_checked if {
	every operation in ["stream", "card", "discover"] {
		request := with_fields({"/operation": operation, "/target/max_data_classification": "internal"})
		codes(request) == ["CLASSIFICATION_EXCEEDED"]
	}
}

test_other_operations_are_not_checked if {
	codes(with_fields({"/operation": "get", "/target/max_data_classification": "internal"})) == []
}
