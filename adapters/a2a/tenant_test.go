package a2a

import (
	"net/url"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// TestTenantEveryPlace: the tenant is read from every place an SDK reads one
// (path prefix, tenant query, params or body, a send's push config), the one
// value they agree on is the request's tenant, and places that disagree are
// refused as invalid params.
//
// Threat: a request names one tenant where writ looks and another where the
// agent looks (the query for the JS SDK's reads, a nested push config), so
// the policy decides about one tenant and the agent acts in another.
// Defence: every place is read, they must agree, and the one value is
// input.request.tenant.
func TestTenantEveryPlace(t *testing.T) {
	q := func(tenant string) url.Values { return url.Values{TenantQuery: {tenant}} }
	rpc := func(params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":` + params + `}`)
	}
	send := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},` +
		`"configuration":{"taskPushNotificationConfig":{"tenant":"retail","url":"https://cb.example/h"}}}`
	for _, c := range []struct {
		name   string
		in     wire.Inbound
		tenant string // "" with bad set: refused
		bad    bool
	}{
		{"query alone", wire.Inbound{Method: "GET", Path: "/tasks/t-1", Query: q("retail")}, "retail", false},
		{"query on a list", wire.Inbound{Method: "GET", Path: "/tasks", Query: q("retail")}, "retail", false},
		{"path and query agree", wire.Inbound{Method: "GET", Path: "/retail/tasks/t-1", Query: q("retail")}, "retail", false},
		{"path and query disagree", wire.Inbound{Method: "GET", Path: "/wholesale/tasks/t-1", Query: q("retail")}, "", true},
		{"body and query disagree", wire.Inbound{Method: "POST", Path: "/tasks/t-1:cancel", Query: q("retail"),
			Body: []byte(`{"tenant":"wholesale"}`)}, "", true},
		{"query not a plain name", wire.Inbound{Method: "GET", Path: "/tasks/t-1", Query: q("../x")}, "", true},
		{"json-rpc query", wire.Inbound{Method: "POST", Path: "/", Query: q("retail"), Body: rpc(`{"id":"t-1"}`)}, "retail", false},
		{"json-rpc params and query disagree", wire.Inbound{Method: "POST", Path: "/", Query: q("retail"),
			Body: rpc(`{"id":"t-1","tenant":"wholesale"}`)}, "", true},
		{"push config of a send", wire.Inbound{Method: "POST", Path: "/message:send", Body: []byte(send)}, "retail", false},
		{"push config and path disagree", wire.Inbound{Method: "POST", Path: "/wholesale/message:send", Body: []byte(send)}, "", true},
	} {
		c.in.Header = v10Header()
		req, f := Parse(c.in, Options{})
		switch {
		case c.bad && (f == nil || f.Kind != task.KindInvalidParams):
			t.Errorf("%s: want invalid params, got %v (tenant %q)", c.name, f, req.Tenant)
		case !c.bad && (f != nil || req.Tenant != c.tenant):
			t.Errorf("%s: tenant %q, fault %v (want %q)", c.name, req.Tenant, f, c.tenant)
		}
	}
}
