# CALLBACK_NOT_ALLOWED / CALLBACK_UNAUTHENTICATED: push notification callbacks.
#
# Only when the request sets a push notification config (input.push). The
# target agent will later call push.url, so an unchecked URL lets a caller make
# the target reach any host (SSRF). Denied when:
#   - push.host is not listed for this target or for the caller's tenant
#     (CALLBACK_NOT_ALLOWED);
#   - push.scheme is not https, unless it is http to a host listed in
#     allow_http_hosts (CALLBACK_NOT_ALLOWED);
#   - the config carries no token for the target to authenticate its callbacks
#     (CALLBACK_UNAUTHENTICATED).
# Hosts must match exactly: no wildcards, no subdomains. Reasons name the host,
# never the URL: input.push.url is the callback's origin only, since a URL's
# userinfo, path or query may carry a credential, and reasons are logged.
#
# Tuned by: data.writ.config.callbacks.targets  (target name -> allowed hosts)
#           data.writ.config.callbacks.tenants  (tenant -> allowed hosts)
#           data.writ.config.callbacks.allow_http_hosts (hosts allowed over http)
#           Every list may be empty and every key left out (no callback is
#           allowed then). A host is an exact name or address in lower case,
#           as input.push.host is: one in upper case, with a wildcard, a
#           scheme or a path would never match, so it is refused at load.
#           writ.yaml adds hosts to the first two (docs/policy-input.md).
package writ.authz

push_requested if input.push

# The allow-lists are read straight from data (a missing list allows nothing),
# so partial evaluation per target folds the target's list into a constant.
callback_host_allowed if input.push.host in data.writ.config.callbacks.targets[input.target.name]

callback_host_allowed if input.push.host in data.writ.config.callbacks.tenants[input.caller.tenant]

callback_scheme_allowed if input.push.scheme == "https"

callback_scheme_allowed if {
	input.push.scheme == "http"
	input.push.host in data.writ.config.callbacks.allow_http_hosts
}

callback_authenticated if input.push.has_token == true

denials contains {
	"code": "CALLBACK_NOT_ALLOWED",
	"reason": sprintf("callback host %v is not allowed for target %v or tenant %v", [
		shown(["push", "host"]),
		shown(["target", "name"]),
		shown(["caller", "tenant"]),
	]),
} if {
	push_requested
	not callback_host_allowed
}

denials contains {
	"code": "CALLBACK_NOT_ALLOWED",
	"reason": sprintf("callback scheme %v is not allowed for host %v; use https", [
		shown(["push", "scheme"]),
		shown(["push", "host"]),
	]),
} if {
	push_requested
	not callback_scheme_allowed
}

denials contains {
	"code": "CALLBACK_UNAUTHENTICATED",
	"reason": sprintf("the callback to %v carries no token", [shown(["push", "host"])]),
} if {
	push_requested
	not callback_authenticated
}

limits["callbacks"] := {
	"range": "targets (agent name -> hosts), tenants (tenant -> hosts), allow_http_hosts (hosts), each possibly empty or left out; a host is an exact name or address in lower case",
	"ends": [
		{"targets": {}, "tenants": {}, "allow_http_hosts": []},
		{
			"targets": {
				"sanctions-screening-agent": ["agents.bank.ae", "evil.example", "x.agents.bank.ae", "127.0.0.1"],
				"kyc-refresh-agent": ["agents.bank.ae", "evil.example"],
			},
			"tenants": {
				"wholesale": ["agents.bank.ae", "evil.example", "x.agents.bank.ae"],
				"retail": ["agents.bank.ae", "evil.example"],
			},
			"allow_http_hosts": ["agents.bank.ae", "evil.example", "x.agents.bank.ae", "127.0.0.1"],
		},
	],
}

default callbacks_config := {}

callbacks_config := data.writ.config.callbacks

callback_host(host) if {
	is_string(host)
	regex.match(`^[^A-Z*/:@\s]+$|^[0-9a-f:.]+$`, host)
}

callback_hosts(hosts) if {
	is_array(hosts)
	every host in hosts {
		callback_host(host)
	}
}

limit_errors contains sprintf("data.writ.config.callbacks is %v; it must be an object of %v", [callbacks_config, limits.callbacks.range]) if {
	not is_object(callbacks_config)
}

limit_errors contains sprintf("data.writ.config.callbacks.%v is not a key of callbacks (targets, tenants, allow_http_hosts)", [key]) if {
	is_object(callbacks_config)
	some key, _ in callbacks_config
	not key in {"targets", "tenants", "allow_http_hosts"}
}

limit_errors contains sprintf("data.writ.config.callbacks.%v is %v; it must be an object of names to lists of hosts", [key, callbacks_config[key]]) if {
	some key in ["targets", "tenants"]
	not is_object(object.get(callbacks_config, key, {}))
}

limit_errors contains sprintf("data.writ.config.callbacks.%v[%v] is %v; it must be a list of hosts, each an exact name or address in lower case", [key, name, hosts]) if {
	some key in ["targets", "tenants"]
	is_object(callbacks_config[key])
	some name, hosts in callbacks_config[key]
	not callback_hosts(hosts)
}

limit_errors contains sprintf("data.writ.config.callbacks.allow_http_hosts is %v; it must be a list of hosts, each an exact name or address in lower case", [hosts]) if {
	hosts := object.get(callbacks_config, "allow_http_hosts", [])
	not callback_hosts(hosts)
}
