package writ.authz_test

import data.writ.authz

test_target_not_in_chain_passes if {
	codes(with_field("/caller/delegation_chain", ["orchestrator", "kyc-refresh-agent"])) == []
}

test_target_in_chain_is_denied if {
	request := with_field("/caller/delegation_chain", ["orchestrator", "sanctions-screening-agent"])
	decision := authz.decision with input as request
	decision.denials == [{
		"code": "CYCLE_DETECTED",
		"reason": "sanctions-screening-agent already appears in the delegation chain [\"orchestrator\", \"sanctions-screening-agent\"]",
	}]
}

test_delegating_to_itself_is_denied if {
	decision := authz.decision with input as with_field("/caller/agent_id", "sanctions-screening-agent")
	decision.denials == [{"code": "CYCLE_DETECTED", "reason": "sanctions-screening-agent is delegating to itself"}]
}

test_target_without_name_is_denied if {
	codes(without_field("/target/name")) == ["CYCLE_DETECTED"]
	codes(with_field("/target/name", "")) == ["CYCLE_DETECTED"]
}

test_caller_without_agent_id_is_checked_on_chain_only if {
	codes(without_field("/caller/agent_id")) == []
}

test_stream_is_checked_too if {
	codes(with_fields({"/operation": "stream", "/caller/delegation_chain": ["sanctions-screening-agent"]})) == ["CYCLE_DETECTED"]
}

test_other_operations_are_not_checked if {
	codes(with_fields({"/operation": "card", "/caller/delegation_chain": ["sanctions-screening-agent"]})) == []
}
