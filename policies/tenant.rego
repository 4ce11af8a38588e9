# TENANT_NOT_PERMITTED: the target agent must serve the caller's tenant.
#
# input.target.tenants lists the tenants the target serves; an empty list means
# it serves every tenant. The request is denied when the list is non-empty and
# does not contain input.caller.tenant (a caller with no tenant is denied), and
# also when the target has no tenant list at all. Applies to every operation.
#
# A request that names a tenant itself (A2A 1.0: the /{tenant}/ path segment or
# params.tenant, in input.request.tenant) is denied unless it names the
# caller's own tenant: the agent would act in the tenant the request names.
#
# Tuned by: nothing in data (the tenant lists come from the agent registry).
package writ.authz

serves_every_tenant if input.target.tenants == []

serves_caller_tenant if input.caller.tenant in input.target.tenants

tenant_permitted if serves_every_tenant

tenant_permitted if serves_caller_tenant

denials contains {
	"code": "TENANT_NOT_PERMITTED",
	"reason": sprintf("%v serves tenants %v, not the caller's tenant %v", [
		shown(["target", "name"]),
		shown(["target", "tenants"]),
		shown(["caller", "tenant"]),
	]),
} if not tenant_permitted

request_tenant_permitted if not input.request.tenant

request_tenant_permitted if input.request.tenant == ""

request_tenant_permitted if input.request.tenant == input.caller.tenant

denials contains {
	"code": "TENANT_NOT_PERMITTED",
	"reason": sprintf("the request names tenant %v, not the caller's tenant %v", [
		shown(["request", "tenant"]),
		shown(["caller", "tenant"]),
	]),
} if not request_tenant_permitted
