package a2a

import (
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// TenantQuery is the query parameter the JS SDK's HTTP+JSON handler reads a
// tenant from (get, cancel, subscribe, list, the extended card and the
// push-config reads), when the path names none.
const TenantQuery = "tenant"

// namedTenant is one place a request names a tenant, and what it names there.
type namedTenant struct{ where, tenant string }

// resolveTenant decides the one tenant a request names, from every place an
// SDK behind writ reads one: the /{tenant}/ path prefix of 1.0 HTTP+JSON
// (pathTenant), the tenant query parameter, params.tenant (JSON-RPC) or the
// body's tenant (HTTP+JSON), and the tenant of a push config in a send's
// configuration. The JS SDK reads the path, else the query (reads) or the
// body (writes), and its stock request handler passes the value to the
// agent; a2a-go (A2A 0.3) reads none. Places that disagree are refused, so
// whichever one an agent reads is the one the policy decided on
// (input.request.tenant); none means "".
func resolveTenant(p *wireParams, in wire.Inbound, pathTenant string) *task.Fault {
	named := []namedTenant{{"path", pathTenant}, {"body", p.Tenant}}
	if in.Query != nil {
		named = append(named, namedTenant{"query", in.Query.Get(TenantQuery)})
	}
	if c := p.Configuration; c != nil && c.TaskPushNotificationConfig != nil {
		named = append(named, namedTenant{"configuration.taskPushNotificationConfig", c.TaskPushNotificationConfig.Tenant})
	}
	var one namedTenant
	for _, n := range named {
		switch {
		case n.tenant == "":
		case one.tenant == "":
			if f := plainName("tenant", n.tenant); f != nil {
				return f
			}
			one = n
		case n.tenant != one.tenant:
			return invalid("tenant %q in the %s does not match tenant %q in the %s; a request names one tenant",
				n.tenant, n.where, one.tenant, one.where)
		}
	}
	p.Tenant = one.tenant
	return nil
}
