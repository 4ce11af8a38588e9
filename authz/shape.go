package authz

import (
	"crypto/sha256"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/writ-authz/writ/authz/internal/segcache"
)

// The OPA input of a decision: only the values at the paths the policy reads
// (reads.go), converted straight from the struct, without intermediate maps. A
// policy that may read everything gets the whole input (Input.Value).

// shape is the tree of read paths: a node with no children is read whole.
type shape map[string]shape

func shapeOf(paths [][]string) shape {
	root := shape{}
	for _, p := range paths {
		n := root
		for _, step := range p {
			c, ok := n[step]
			if !ok {
				c = shape{}
				n[step] = c
			}
			n = c
		}
	}
	return root
}

// value is the OPA input of in under p: only what the policy reads, converted
// straight from the struct (the target part comes from tv when given).
func (p *Policy) value(in *Input, tv ast.Value) ast.Value {
	if p.reads.all {
		return in.Value()
	}
	obj := ast.NewObject()
	for k, sub := range p.shape {
		var v ast.Value
		switch k {
		case "version":
			v = ast.String(in.Version)
		case "operation":
			v = ast.String(in.Operation)
		case "protocol":
			v = pick(sub, func(f string) ast.Value {
				switch f {
				case "name":
					return ast.String(in.Protocol.Name)
				case "version":
					return ast.String(in.Protocol.Version)
				case "binding":
					return ast.String(in.Protocol.Binding)
				case "method":
					return ast.String(in.Protocol.Method)
				}
				return nil
			}, protocolFields)
		case "caller":
			v = p.callerValue(&in.Caller, sub)
		case "target":
			if tv != nil {
				v = tv
			} else {
				v = in.Target.pruned(sub)
			}
		case "task":
			v = in.Task.pruned(sub)
		case "push":
			if in.Push != nil {
				v = in.Push.pruned(sub)
			}
		case "request":
			r := &in.Request
			v = pick(sub, func(f string) ast.Value {
				switch f {
				case "method":
					return ast.String(r.Method)
				case "path":
					return ast.String(r.Path)
				case "host":
					return ast.String(r.Host)
				case "source_address":
					return ast.String(r.SourceAddress)
				case "tenant":
					return ast.String(r.Tenant)
				}
				return nil
			}, requestFields)
		}
		if v != nil {
			obj.Insert(keyTerm(k), ast.NewTerm(v))
		}
	}
	return obj
}

// keyTerms are the input's field names as terms, made once: an object key is
// never mutated, so every input can share them.
var keyTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, fs := range [][]string{{"version", "operation", "protocol", "caller", "target", "task", "push", "request",
		"owner", "agent_id", "tenant", "user_id", "text", "file", "data"},
		protocolFields, requestFields, callerFields, targetFields, taskFields, pushFields} {
		for _, f := range fs {
			m[f] = ast.StringTerm(f)
		}
	}
	return m
}()

func keyTerm(k string) *ast.Term {
	if t, ok := keyTerms[k]; ok {
		return t
	}
	return ast.StringTerm(k)
}

var (
	protocolFields = []string{"name", "version", "binding", "method"}
	requestFields  = []string{"method", "path", "host", "source_address", "tenant"}
)

// pick builds an object of the fields sub names (all fields when sub is empty);
// get returns nil for a field the input does not have.
func pick(sub shape, get func(string) ast.Value, all []string) ast.Value {
	obj := ast.NewObject()
	add := func(f string) {
		if v := get(f); v != nil {
			obj.Insert(keyTerm(f), ast.NewTerm(v))
		}
	}
	if len(sub) == 0 {
		for _, f := range all {
			add(f)
		}
		return obj
	}
	for f := range sub {
		add(f)
	}
	return obj
}

// callers memoizes the caller part of the input (the fields the policy reads)
// by their digest and the policy revision: decisions of a known caller that
// miss the decision cache share one converted caller. A caller seen once only
// passes through the cache's probation segment.
var callers = mustCache(segcache.New[[32]byte, ast.Value](4096, 8<<20, valueBytes))

// callerValue is the caller part of the input, from callers when it is there.
func (p *Policy) callerValue(c *InputCaller, sub shape) ast.Value {
	if len(sub) == 0 {
		return c.value() // the whole caller: memoized by value()
	}
	bp := keyBuf.Get().(*[]byte)
	e := keyEnc{b: (*bp)[:0]}
	e.s(p.Revision)
	for _, path := range p.reads.paths {
		if path[0] == "caller" {
			e.caller(c, path[1:])
		}
	}
	d := sha256.Sum256(e.b)
	*bp = e.b
	keyBuf.Put(bp)
	if v, ok := callers.Get(d); ok {
		return v
	}
	v := c.pruned(sub)
	callers.Add(d, v)
	return v
}

func (c *InputCaller) pruned(sub shape) ast.Value {
	if len(sub) == 0 {
		return c.value()
	}
	return pick(sub, func(f string) ast.Value {
		switch f {
		case "authenticated":
			return ast.Boolean(c.Authenticated)
		case "method":
			return ast.String(c.Method)
		case "issuer":
			return ast.String(c.Issuer)
		case "agent_id":
			return ast.String(c.AgentID)
		case "user_id":
			return ast.String(c.UserID)
		case "tenant":
			return ast.String(c.Tenant)
		case "scopes":
			return stringArray(c.Scopes)
		case "delegation_chain":
			return stringArray(c.Chain)
		case "claims":
			return claimsValue(c.Claims, sub["claims"])
		}
		return nil
	}, nil)
}

// claimsValue converts the claims the policy reads: all of them, or only the
// top-level claims it names.
func claimsValue(claims map[string]any, sub shape) ast.Value {
	if len(sub) == 0 {
		v, err := ast.InterfaceToValue(claims)
		if err != nil {
			return ast.NewObject()
		}
		return v
	}
	obj := ast.NewObject()
	for k := range sub {
		raw, ok := claims[k]
		if !ok {
			continue
		}
		if v, err := ast.InterfaceToValue(raw); err == nil {
			obj.Insert(keyTerm(k), ast.NewTerm(v))
		}
	}
	return obj
}

func (t *InputTarget) pruned(sub shape) ast.Value {
	if len(sub) == 0 {
		return t.build()
	}
	return pick(sub, func(f string) ast.Value {
		switch f {
		case "name":
			return ast.String(t.Name)
		case "owner":
			return ast.String(t.Owner)
		case "tenants":
			return stringArray(t.Tenants)
		case "max_data_classification":
			return ast.String(t.MaxClassification)
		case "security_schemes":
			return stringArray(t.SecuritySchemes)
		case "skills":
			return t.skillsValue()
		case "push_notifications":
			return ast.Boolean(t.PushNotifications)
		}
		return nil
	}, nil)
}

func (t *InputTask) pruned(sub shape) ast.Value {
	if len(sub) == 0 {
		return t.value()
	}
	return pick(sub, func(f string) ast.Value {
		switch f {
		case "id":
			return ast.String(t.ID)
		case "context_id":
			return ast.String(t.ContextID)
		case "state":
			return ast.String(t.State)
		case "owner":
			if o := t.Owner; o != nil {
				return ast.NewObject(
					item("agent_id", ast.String(o.AgentID)),
					item("tenant", ast.String(o.Tenant)),
					item("user_id", ast.String(o.UserID)),
				)
			}
			return nil
		case "data_classification":
			return ast.String(t.Classification)
		case "parts":
			return ast.NewObject(
				item("text", ast.Number(strconv.Itoa(t.Parts.Text))),
				item("file", ast.Number(strconv.Itoa(t.Parts.File))),
				item("data", ast.Number(strconv.Itoa(t.Parts.Data))),
			)
		case "file_uris":
			return stringArray(t.FileURIs)
		case "skill":
			return ast.String(t.Skill)
		}
		return nil
	}, nil)
}

func (p *InputPush) pruned(sub shape) ast.Value {
	return pick(sub, func(f string) ast.Value {
		switch f {
		case "url":
			return ast.String(p.URL)
		case "scheme":
			return ast.String(p.Scheme)
		case "host":
			return ast.String(p.Host)
		case "port":
			return ast.Number(strconv.Itoa(p.Port))
		case "has_token":
			return ast.Boolean(p.HasToken)
		case "auth_scheme":
			return ast.String(p.AuthScheme)
		}
		return nil
	}, pushFields)
}
