package authz

import (
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/open-policy-agent/opa/v1/ast"
)

// Value converts the input to an OPA value directly, field by field, so a decision
// costs no JSON encoding and decoding. TestValueMatchesJSON keeps it equal to the
// value OPA derives from the struct's JSON form.
func (in *Input) Value() ast.Value {
	obj := ast.NewObject(
		item("version", ast.String(in.Version)),
		item("operation", ast.String(in.Operation)),
		item("protocol", ast.NewObject(
			item("name", ast.String(in.Protocol.Name)),
			item("version", ast.String(in.Protocol.Version)),
			item("binding", ast.String(in.Protocol.Binding)),
			item("method", ast.String(in.Protocol.Method)),
		)),
		item("caller", in.Caller.value()),
		item("target", in.Target.value()),
		item("task", in.Task.value()),
		item("request", ast.NewObject(
			item("method", ast.String(in.Request.Method)),
			item("path", ast.String(in.Request.Path)),
			item("host", ast.String(in.Request.Host)),
			item("source_address", ast.String(in.Request.SourceAddress)),
		)),
	)
	if p := in.Push; p != nil {
		obj.Insert(ast.StringTerm("push"), ast.NewTerm(ast.NewObject(
			item("url", ast.String(p.URL)),
			item("scheme", ast.String(p.Scheme)),
			item("host", ast.String(p.Host)),
			item("port", ast.IntNumberTerm(p.Port).Value),
			item("has_token", ast.Boolean(p.HasToken)),
			item("auth_scheme", ast.String(p.AuthScheme)),
		)))
	}
	return obj
}

// claimsValues caches the OPA form of verified claims by their digest: a token's
// claims are converted once, not on every decision. Content-addressed, so sharing
// it across engines is safe.
var claimsValues, _ = lru.New[[32]byte, ast.Value](4096)

func (c *InputCaller) claimsValue() ast.Value {
	if c.claimsDigest != ([32]byte{}) {
		if v, ok := claimsValues.Get(c.claimsDigest); ok {
			return v
		}
	}
	v, err := ast.InterfaceToValue(c.Claims)
	if err != nil {
		v = ast.NewObject()
	}
	if c.claimsDigest != ([32]byte{}) {
		claimsValues.Add(c.claimsDigest, v)
	}
	return v
}

func (c *InputCaller) value() ast.Value {
	claims := c.claimsValue()
	return ast.NewObject(
		item("authenticated", ast.Boolean(c.Authenticated)),
		item("method", ast.String(c.Method)),
		item("issuer", ast.String(c.Issuer)),
		item("agent_id", ast.String(c.AgentID)),
		item("user_id", ast.String(c.UserID)),
		item("tenant", ast.String(c.Tenant)),
		item("scopes", stringArray(c.Scopes)),
		item("delegation_chain", stringArray(c.Chain)),
		item("claims", claims),
	)
}

func (t *InputTarget) value() ast.Value {
	skills := make([]*ast.Term, len(t.Skills))
	for i, s := range t.Skills {
		skills[i] = ast.NewTerm(ast.NewObject(item("id", ast.String(s.ID)), item("tags", stringArray(s.Tags))))
	}
	return ast.NewObject(
		item("name", ast.String(t.Name)),
		item("owner", ast.String(t.Owner)),
		item("tenants", stringArray(t.Tenants)),
		item("max_data_classification", ast.String(t.MaxClassification)),
		item("security_schemes", stringArray(t.SecuritySchemes)),
		item("skills", ast.NewArray(skills...)),
		item("push_notifications", ast.Boolean(t.PushNotifications)),
	)
}

func (t *InputTask) value() ast.Value {
	obj := ast.NewObject(
		item("id", ast.String(t.ID)),
		item("context_id", ast.String(t.ContextID)),
		item("state", ast.String(t.State)),
		item("data_classification", ast.String(t.Classification)),
		item("parts", ast.NewObject(
			item("text", ast.IntNumberTerm(t.Parts.Text).Value),
			item("file", ast.IntNumberTerm(t.Parts.File).Value),
			item("data", ast.IntNumberTerm(t.Parts.Data).Value),
		)),
		item("file_uris", stringArray(t.FileURIs)),
		item("skill", ast.String(t.Skill)),
	)
	if o := t.Owner; o != nil {
		obj.Insert(ast.StringTerm("owner"), ast.NewTerm(ast.NewObject(
			item("agent_id", ast.String(o.AgentID)),
			item("tenant", ast.String(o.Tenant)),
			item("user_id", ast.String(o.UserID)),
		)))
	}
	return obj
}

func item(key string, v ast.Value) [2]*ast.Term {
	return ast.Item(ast.StringTerm(key), ast.NewTerm(v))
}

func stringArray(ss []string) ast.Value {
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = ast.StringTerm(s)
	}
	return ast.NewArray(terms...)
}
