package writ.authz_test

import data.writ.authz

test_three_hops_pass if {
	codes(with_field("/caller/delegation_chain", ["a", "b", "c"])) == []
}

test_four_hops_fail if {
	codes(with_field("/caller/delegation_chain", ["a", "b", "c", "d"])) == ["DEPTH_EXCEEDED"]
}

test_stream_is_checked_too if {
	request := with_fields({"/operation": "stream", "/caller/delegation_chain": ["a", "b", "c", "d"]})
	codes(request) == ["DEPTH_EXCEEDED"]
}

test_other_operations_are_not_checked if {
	codes(with_fields({"/operation": "card", "/caller/delegation_chain": ["a", "b", "c", "d"]})) == []
}

test_missing_chain_counts_as_zero_hops if {
	codes(without_field("/caller/delegation_chain")) == []
}

test_max_depth_comes_from_data if {
	codes(with_field("/caller/delegation_chain", ["a", "b"])) == ["DEPTH_EXCEEDED"] with data.writ.config.max_delegation_depth as 2
}

test_missing_max_depth_defaults_to_four if {
	config := object.remove(data.writ.config, ["max_delegation_depth"])
	codes(with_field("/caller/delegation_chain", ["a", "b", "c"])) == [] with data.writ.config as config
	codes(with_field("/caller/delegation_chain", ["a", "b", "c", "d"])) == ["DEPTH_EXCEEDED"] with data.writ.config as config
}

test_non_numeric_max_depth_denies if {
	codes(valid_request) == ["DEPTH_EXCEEDED"] with data.writ.config.max_delegation_depth as "4"
}

test_reason if {
	decision := authz.decision with input as with_field("/caller/delegation_chain", ["a", "b", "c", "d"])
	decision.denials == [{"code": "DEPTH_EXCEEDED", "reason": "delegation chain is 4 deep; max is 4"}]
}
