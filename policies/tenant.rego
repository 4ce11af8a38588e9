# TENANT_NOT_PERMITTED: the target agent must serve the caller's tenant.
#
# input.target.tenants lists the tenants the target serves; an empty list means
# it serves every tenant. The request is denied when the list is non-empty and
# does not contain input.caller.tenant (a caller with no tenant is denied), and
# also when the target has no tenant list at all. Applies to every operation.
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
