package writ.authz_test

import data.writ.authz

# A chain of n hops (n >= 0), named hop-1 … hop-n.
chain_of(n) := [sprintf("hop-%d", [i]) | some i in numbers.range(0, n); i > 0]

# The longest chain the limit admits, and one hop more.
longest_chain := chain_of(authz.max_depth - 1)

too_long_chain := chain_of(authz.max_depth)

test_chain_of_makes_n_hops if {
	expect(chain_of(0), [])
	expect(chain_of(3), ["hop-1", "hop-2", "hop-3"])
}

test_longest_chain_passes if {
	expect(codes(with_field("/caller/delegation_chain", longest_chain)), [])
}

test_chain_at_the_limit_fails if {
	expect(codes(with_field("/caller/delegation_chain", too_long_chain)), ["DEPTH_EXCEEDED"])
}

test_stream_is_checked_too if {
	request := with_fields({"/operation": "stream", "/caller/delegation_chain": too_long_chain})
	expect(codes(request), ["DEPTH_EXCEEDED"])
}

test_other_operations_are_not_checked if {
	expect(codes(with_fields({"/operation": "card", "/caller/delegation_chain": too_long_chain})), [])
}

test_missing_chain_counts_as_zero_hops if {
	expect(codes(without_field("/caller/delegation_chain")), [])
}

test_max_depth_comes_from_data if {
	expect(codes(with_field("/caller/delegation_chain", ["a"])), []) with data.writ.config.max_delegation_depth as 2
	expect(codes(with_field("/caller/delegation_chain", ["a", "b"])), ["DEPTH_EXCEEDED"]) with data.writ.config.max_delegation_depth as 2
}

test_depth_one_admits_direct_callers_only if {
	expect(codes(with_field("/caller/delegation_chain", [])), []) with data.writ.config.max_delegation_depth as 1
	expect(codes(with_field("/caller/delegation_chain", ["orchestrator"])), ["DEPTH_EXCEEDED"]) with data.writ.config.max_delegation_depth as 1
}

test_missing_max_depth_defaults_to_four if {
	config := object.remove(data.writ.config, ["max_delegation_depth"])
	expect(codes(with_field("/caller/delegation_chain", ["a", "b", "c"])), []) with data.writ.config as config
	expect(codes(with_field("/caller/delegation_chain", ["a", "b", "c", "d"])), ["DEPTH_EXCEEDED"]) with data.writ.config as config
}

test_non_numeric_max_depth_denies if {
	request := valid_request
	expect(codes(request), ["DEPTH_EXCEEDED"]) with data.writ.config.max_delegation_depth as "4"
}

test_reason if {
	decision := decision_of(with_field("/caller/delegation_chain", ["a", "b", "c", "d"])) with data.writ.config.max_delegation_depth as 4
	expect(decision.denials, [{"code": "DEPTH_EXCEEDED", "reason": "delegation chain is 4 deep; max is 4"}])
}

test_max_depth_out_of_range_is_refused if {
	every depth in [0, 17, 2.5, "4", null] {
		expect(limit_errors_for("max_delegation_depth", config_with("max_delegation_depth", depth)), {sprintf("data.writ.config.max_delegation_depth is %v; it must be an integer from 1 to 16", [depth])})
	}
}

test_missing_max_depth_is_in_range if {
	expect(limit_errors_for("max_delegation_depth", object.remove(data.writ.config, ["max_delegation_depth"])), set())
}

test_every_egress_call_is_checked if {
	every operation in ["card", "get", "discover"] {
		request := with_fields({"/direction": "egress", "/operation": operation, "/caller/delegation_chain": ["a", "b", "c", "d"]})
		expect(codes(request), ["DEPTH_EXCEEDED"]) with data.writ.config.max_delegation_depth as 4
		ingress := with_fields({"/operation": operation, "/caller/delegation_chain": ["a", "b", "c", "d"]})
		expect(codes(ingress), []) with data.writ.config.max_delegation_depth as 4
	}
}
