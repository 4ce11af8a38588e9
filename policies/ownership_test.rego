package writ.authz_test

import data.writ.authz

# A follow-up on task t-1, which writ recorded as owned by the caller.
follow_up := json.patch(valid_request, [
	{"op": "add", "path": "/operation", "value": "get"},
	{"op": "remove", "path": "/push"},
	{"op": "add", "path": "/task/id", "value": "t-1"},
	{"op": "add", "path": "/task/state", "value": "running"},
	{"op": "add", "path": "/task/owner", "value": {"agent_id": "payments-investigator", "tenant": "wholesale", "user_id": "u-42"}},
])

follow_up_with(changes) := json.patch(follow_up, [{"op": "add", "path": p, "value": v} | some p, v in changes])

other_agent := follow_up_with({"/task/owner/agent_id": "kyc-refresh-agent"})

other_user := follow_up_with({"/task/owner/user_id": "u-7"})

other_tenant := follow_up_with({"/task/owner/tenant": "retail"})

test_owner_passes if {
	codes(follow_up) == []
}

test_agent_mode if {
	codes(other_agent) == ["NOT_TASK_OWNER"] with data.writ.config.ownership as "agent"
	codes(other_tenant) == ["NOT_TASK_OWNER"] with data.writ.config.ownership as "agent"
	codes(other_user) == [] with data.writ.config.ownership as "agent"
}

test_tenant_mode if {
	codes(other_agent) == [] with data.writ.config.ownership as "tenant"
	codes(other_user) == [] with data.writ.config.ownership as "tenant"
	codes(other_tenant) == ["NOT_TASK_OWNER"] with data.writ.config.ownership as "tenant"
}

test_user_mode if {
	codes(other_agent) == [] with data.writ.config.ownership as "user"
	codes(other_user) == ["NOT_TASK_OWNER"] with data.writ.config.ownership as "user"
	codes(other_tenant) == ["NOT_TASK_OWNER"] with data.writ.config.ownership as "user"
}

test_missing_mode_defaults_to_agent if {
	config := object.remove(data.writ.config, ["ownership"])
	codes(other_agent) == ["NOT_TASK_OWNER"] with data.writ.config as config
	codes(follow_up) == [] with data.writ.config as config
}

test_unknown_mode_denies_every_follow_up if {
	codes(follow_up) == ["NOT_TASK_OWNER"] with data.writ.config.ownership as "team"
}

test_reason if {
	decision := authz.decision with input as other_agent
	decision.denials == [{
		"code": "NOT_TASK_OWNER",
		"reason": "task t-1 belongs to agent kyc-refresh-agent, user u-42 in tenant wholesale; the caller is agent payments-investigator, user u-42 in tenant wholesale (ownership mode agent)",
	}]
}

test_every_follow_up_operation_is_checked if {
	every operation in ["get", "cancel", "subscribe", "push_config.set", "push_config.get", "push_config.list", "push_config.delete", "send", "stream"] {
		codes(follow_up_with({"/operation": operation, "/task/owner/agent_id": "x"})) == ["NOT_TASK_OWNER"]
	}
}

test_new_send_is_not_a_follow_up if {
	codes(follow_up_with({"/operation": "send", "/task/id": "", "/task/owner/agent_id": "x"})) == []
}

test_other_operations_are_not_checked if {
	every operation in ["list", "card", "card.extended", "discover"] {
		codes(follow_up_with({"/operation": operation, "/task/owner/agent_id": "x"})) == []
	}
}

test_no_owner_record_is_left_to_writ if {
	codes(json.patch(other_agent, [{"op": "remove", "path": "/task/owner"}])) == []
}

test_missing_identities_never_match if {
	codes(follow_up_with({"/task/owner": {}})) == ["NOT_TASK_OWNER"]
	codes(json.patch(follow_up, [
		{"op": "remove", "path": "/caller/agent_id"},
		{"op": "remove", "path": "/task/owner/agent_id"},
	])) == ["NOT_TASK_OWNER"]
	codes(follow_up_with({"/caller/agent_id": "", "/task/owner/agent_id": ""})) == ["NOT_TASK_OWNER"]
}
