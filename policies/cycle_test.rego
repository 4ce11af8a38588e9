# The chains here have up to two hops, more than the lowest depth limit
# admits: each expression pins max_delegation_depth to the fixture's 4, so
# only the cycle check is under test.
package writ.authz_test

test_target_not_in_chain_passes if {
	expect(codes(with_field("/caller/delegation_chain", ["orchestrator", "kyc-refresh-agent"])), []) with data.writ.config.max_delegation_depth as 4
}

test_target_in_chain_is_denied if {
	decision := decision_of(with_field("/caller/delegation_chain", ["orchestrator", "sanctions-screening-agent"])) with data.writ.config.max_delegation_depth as 4
	expect(decision.denials, [{
		"code": "CYCLE_DETECTED",
		"reason": "sanctions-screening-agent already appears in the delegation chain [\"orchestrator\", \"sanctions-screening-agent\"]",
	}])
}

test_delegating_to_itself_is_denied if {
	decision := decision_of(with_field("/caller/agent_id", "sanctions-screening-agent"))
	expect(decision.denials, [{"code": "CYCLE_DETECTED", "reason": "sanctions-screening-agent is delegating to itself"}])
}

test_target_without_name_is_denied if {
	expect(codes(without_field("/target/name")), ["CYCLE_DETECTED"])
	expect(codes(with_field("/target/name", "")), ["CYCLE_DETECTED"])
}

test_caller_without_agent_id_is_checked_on_chain_only if {
	expect(codes(without_field("/caller/agent_id")), [])
}

test_stream_is_checked_too if {
	request := with_fields({"/operation": "stream", "/caller/delegation_chain": ["sanctions-screening-agent"]})
	expect(codes(request), ["CYCLE_DETECTED"]) with data.writ.config.max_delegation_depth as 4
}

test_other_operations_are_not_checked if {
	request := with_fields({"/operation": "card", "/caller/delegation_chain": ["sanctions-screening-agent"]})
	expect(codes(request), []) with data.writ.config.max_delegation_depth as 4
}

test_every_egress_call_is_checked if {
	every operation in ["card", "get", "cancel", "discover"] {
		request := with_fields({"/direction": "egress", "/operation": operation, "/caller/delegation_chain": ["sanctions-screening-agent"]})
		expect(codes(request), ["CYCLE_DETECTED"]) with data.writ.config.max_delegation_depth as 4
	}
}
