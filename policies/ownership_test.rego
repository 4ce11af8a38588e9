package writ.authz_test

import data.writ.authz

# A follow-up on task t-1, which writ recorded as owned by the caller.
follow_up := json.patch(valid_request, [
	{"op": "add", "path": "/operation", "value": "get"},
	{"op": "add", "path": "/task/id", "value": "t-1"},
	{"op": "add", "path": "/task/state", "value": "running"},
	{"op": "add", "path": "/task/owner", "value": {"agent_id": "payments-investigator", "tenant": "wholesale", "user_id": "u-42"}},
])

follow_up_with(changes) := json.patch(follow_up, [{"op": "add", "path": p, "value": v} | some p, v in changes])

other_agent := follow_up_with({"/task/owner/agent_id": "kyc-refresh-agent"})

other_user := follow_up_with({"/task/owner/user_id": "u-7"})

other_tenant := follow_up_with({"/task/owner/tenant": "retail"})

# The owner fields each ownership mode compares.
mode_fields := {"agent": {"tenant", "agent_id"}, "tenant": {"tenant"}, "user": {"tenant", "user_id"}}

# follow_up by a caller who differs from the owner in one field.
differs_in(field) := follow_up_with({sprintf("/task/owner/%s", [field]): "someone-else"})

test_owner_passes if {
	expect(codes(follow_up), [])
}

test_the_configured_mode_compares_its_fields_only if {
	fields := mode_fields[authz.ownership_mode]
	expect([field | some field in fields; codes(differs_in(field)) != ["NOT_TASK_OWNER"]], [])
	expect([field | some field in ({"agent_id", "tenant", "user_id"} - fields); codes(differs_in(field)) != []], [])
}

test_agent_mode if {
	expect(codes(other_agent), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "agent"
	expect(codes(other_tenant), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "agent"
	expect(codes(other_user), []) with data.writ.config.ownership as "agent"
}

test_tenant_mode if {
	expect(codes(other_agent), []) with data.writ.config.ownership as "tenant"
	expect(codes(other_user), []) with data.writ.config.ownership as "tenant"
	expect(codes(other_tenant), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "tenant"
}

test_user_mode if {
	expect(codes(other_agent), []) with data.writ.config.ownership as "user"
	expect(codes(other_user), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "user"
	expect(codes(other_tenant), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "user"
}

test_missing_mode_defaults_to_agent if {
	config := object.remove(data.writ.config, ["ownership"])
	expect(codes(other_agent), ["NOT_TASK_OWNER"]) with data.writ.config as config
	expect(codes(follow_up), []) with data.writ.config as config
}

test_unknown_mode_denies_every_follow_up if {
	expect(codes(follow_up), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "team"
}

test_reason if {
	decision := decision_of(other_agent) with data.writ.config.ownership as "agent"
	expect(decision.denials, [{
		"code": "NOT_TASK_OWNER",
		"reason": "task t-1 belongs to agent kyc-refresh-agent, user u-42 in tenant wholesale; the caller is agent payments-investigator, user u-42 in tenant wholesale (ownership mode agent)",
	}])
}

test_every_follow_up_operation_is_checked if {
	every operation in ["get", "cancel", "subscribe", "push_config.set", "push_config.get", "push_config.list", "push_config.delete", "send", "stream"] {
		expect(codes(follow_up_with({"/operation": operation, "/task/owner/agent_id": "x"})), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "agent"
	}
}

test_new_send_is_not_a_follow_up if {
	expect(codes(follow_up_with({"/operation": "send", "/task/id": "", "/task/owner/agent_id": "x"})), [])
}

test_other_operations_are_not_checked if {
	every operation in ["list", "card", "card.extended", "discover"] {
		expect(codes(follow_up_with({"/operation": operation, "/task/owner/agent_id": "x"})), [])
	}
}

test_no_owner_record_is_left_to_writ if {
	expect(codes(json.patch(other_agent, [{"op": "remove", "path": "/task/owner"}])), [])
}

test_missing_identities_never_match if {
	expect(codes(follow_up_with({"/task/owner": {}})), ["NOT_TASK_OWNER"])
	expect(
		codes(json.patch(follow_up, [
			{"op": "remove", "path": "/caller/agent_id"},
			{"op": "remove", "path": "/task/owner/agent_id"},
		])),
		["NOT_TASK_OWNER"],
	) with data.writ.config.ownership as "agent"
	expect(codes(follow_up_with({"/caller/agent_id": "", "/task/owner/agent_id": ""})), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "agent"
	expect(codes(follow_up_with({"/caller/user_id": "", "/task/owner/user_id": ""})), ["NOT_TASK_OWNER"]) with data.writ.config.ownership as "user"
}

test_mode_out_of_range_is_refused if {
	every mode in ["team", "Agent", 1] {
		expect(limit_errors_for("ownership", config_with("ownership", mode)), {sprintf("data.writ.config.ownership is %v; it must be agent, tenant or user", [mode])})
	}
	expect(limit_errors_for("ownership", object.remove(data.writ.config, ["ownership"])), set())
}
