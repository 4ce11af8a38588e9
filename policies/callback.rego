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
