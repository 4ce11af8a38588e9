package authz

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/writ-authz/writ/authz/identity"
)

// The decision-cache key of an input under a policy: a digest of the values at
// the paths the policy reads (reads.go), so inputs that differ only where the
// policy cannot look share a decision. A policy that may read everything is
// keyed by Key, on every field.

// keyBuf pools the buffers keys are encoded into.
var keyBuf = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// key is the decision-cache key of in under p: the revision and, for each read
// path in order, the value there (length-prefixed, with a marker for an absent
// value), hashed. The paths themselves need not be encoded: they are fixed by
// the policy, hence by the revision.
func (p *Policy) key(in *Input) [32]byte {
	if p.reads.all {
		return Key(p.Revision, in)
	}
	bp := keyBuf.Get().(*[]byte)
	e := keyEnc{b: (*bp)[:0]}
	e.s(p.Revision)
	for _, path := range p.reads.paths {
		e.value(in, path)
	}
	sum := sha256.Sum256(e.b)
	*bp = e.b
	keyBuf.Put(bp)
	return sum
}

type keyEnc struct{ b []byte }

func (e *keyEnc) n(n int) {
	e.b = append(e.b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func (e *keyEnc) s(v string) {
	e.n(len(v))
	e.b = append(e.b, v...)
}

func (e *keyEnc) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *keyEnc) list(vs []string) {
	e.n(len(vs))
	for _, v := range vs {
		e.s(v)
	}
}

// absent marks a path the input does not have.
func (e *keyEnc) absent() { e.b = append(e.b, 0xff) }

func (e *keyEnc) value(in *Input, path []string) {
	switch path[0] {
	case "version":
		e.s(in.Version)
	case "operation":
		e.s(in.Operation)
	case "protocol":
		e.protocol(&in.Protocol, path[1:])
	case "caller":
		e.caller(&in.Caller, path[1:])
	case "target":
		e.target(&in.Target, path[1:])
	case "task":
		e.task(&in.Task, path[1:])
	case "push":
		if in.Push == nil {
			e.absent()
			return
		}
		e.push(in.Push, path[1:])
	case "request":
		e.request(&in.Request, path[1:])
	default:
		e.absent()
	}
}

func (e *keyEnc) protocol(p *InputProtocol, rest []string) {
	if len(rest) == 0 {
		e.s(p.Name)
		e.s(p.Version)
		e.s(p.Binding)
		e.s(p.Method)
		return
	}
	switch rest[0] {
	case "name":
		e.s(p.Name)
	case "version":
		e.s(p.Version)
	case "binding":
		e.s(p.Binding)
	case "method":
		e.s(p.Method)
	default:
		e.absent()
	}
}

func (e *keyEnc) caller(c *InputCaller, rest []string) {
	if len(rest) == 0 {
		for _, f := range callerFields {
			e.callerField(c, f, nil)
		}
		return
	}
	e.callerField(c, rest[0], rest[1:])
}

func (e *keyEnc) callerField(c *InputCaller, f string, rest []string) {
	switch f {
	case "authenticated":
		e.flag(c.Authenticated)
	case "method":
		e.s(c.Method)
	case "issuer":
		e.s(c.Issuer)
	case "agent_id":
		e.s(c.AgentID)
	case "user_id":
		e.s(c.UserID)
	case "tenant":
		e.s(c.Tenant)
	case "scopes":
		e.list(c.Scopes)
	case "delegation_chain":
		e.list(c.Chain)
	case "claims":
		if len(rest) == 0 {
			d := c.claimsDigest
			if d == ([32]byte{}) {
				d = identity.DigestClaims(c.Claims)
			}
			e.b = append(e.b, d[:]...)
			return
		}
		v, ok := claimAt(c.Claims, rest)
		if !ok {
			e.absent()
			return
		}
		raw, err := json.Marshal(v)
		if err != nil {
			// A claim JSON cannot encode (NaN from Envoy's metadata) is keyed by
			// the whole claim set's digest, under a tag byte no length prefix
			// of a bounded request starts with.
			d := identity.DigestClaims(c.Claims)
			e.b = append(e.b, 0xfe)
			e.b = append(e.b, d[:]...)
			return
		}
		e.s(string(raw))
	default:
		e.absent()
	}
}

var callerFields = []string{"authenticated", "method", "issuer", "agent_id", "user_id", "tenant", "scopes", "delegation_chain", "claims"}

// claimAt follows object keys into the claims; it stops at the first value that
// is not an object (the policy then reads all of that value).
func claimAt(claims map[string]any, path []string) (any, bool) {
	var v any = claims
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return v, true
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func (e *keyEnc) target(t *InputTarget, rest []string) {
	if len(rest) == 0 {
		for _, f := range targetFields {
			e.targetField(t, f)
		}
		return
	}
	e.targetField(t, rest[0])
}

func (e *keyEnc) targetField(t *InputTarget, f string) {
	switch f {
	case "name":
		e.s(t.Name)
	case "owner":
		e.s(t.Owner)
	case "tenants":
		e.list(t.Tenants)
	case "max_data_classification":
		e.s(t.MaxClassification)
	case "security_schemes":
		e.list(t.SecuritySchemes)
	case "skills":
		e.n(len(t.Skills))
		for _, sk := range t.Skills {
			e.s(sk.ID)
			e.list(sk.Tags)
		}
	case "push_notifications":
		e.flag(t.PushNotifications)
	default:
		e.absent()
	}
}

var targetFields = []string{"name", "owner", "tenants", "max_data_classification", "security_schemes", "skills", "push_notifications"}

func (e *keyEnc) task(k *InputTask, rest []string) {
	if len(rest) == 0 {
		for _, f := range taskFields {
			e.taskField(k, f)
		}
		return
	}
	e.taskField(k, rest[0])
}

func (e *keyEnc) taskField(k *InputTask, f string) {
	switch f {
	case "id":
		e.s(k.ID)
	case "context_id":
		e.s(k.ContextID)
	case "state":
		e.s(k.State)
	case "owner":
		if k.Owner == nil {
			e.absent()
			return
		}
		e.s(k.Owner.AgentID)
		e.s(k.Owner.Tenant)
		e.s(k.Owner.UserID)
	case "data_classification":
		e.s(k.Classification)
	case "parts":
		e.n(k.Parts.Text)
		e.n(k.Parts.File)
		e.n(k.Parts.Data)
	case "file_uris":
		e.list(k.FileURIs)
	case "skill":
		e.s(k.Skill)
	default:
		e.absent()
	}
}

var taskFields = []string{"id", "context_id", "state", "owner", "data_classification", "parts", "file_uris", "skill"}

func (e *keyEnc) push(p *InputPush, rest []string) {
	if len(rest) == 0 {
		for _, f := range pushFields {
			e.pushField(p, f)
		}
		return
	}
	e.pushField(p, rest[0])
}

func (e *keyEnc) pushField(p *InputPush, f string) {
	switch f {
	case "url":
		e.s(p.URL)
	case "scheme":
		e.s(p.Scheme)
	case "host":
		e.s(p.Host)
	case "port":
		e.n(p.Port)
	case "has_token":
		e.flag(p.HasToken)
	case "auth_scheme":
		e.s(p.AuthScheme)
	default:
		e.absent()
	}
}

var pushFields = []string{"url", "scheme", "host", "port", "has_token", "auth_scheme"}

func (e *keyEnc) request(r *InputRequest, rest []string) {
	if len(rest) == 0 {
		e.s(r.Method)
		e.s(r.Path)
		e.s(r.Host)
		e.s(r.SourceAddress)
		e.s(r.Tenant)
		return
	}
	switch rest[0] {
	case "method":
		e.s(r.Method)
	case "path":
		e.s(r.Path)
	case "host":
		e.s(r.Host)
	case "source_address":
		e.s(r.SourceAddress)
	case "tenant":
		e.s(r.Tenant)
	default:
		e.absent()
	}
}
