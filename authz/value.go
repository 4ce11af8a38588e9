package authz

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/authz/internal/segcache"
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
			item("tenant", ast.String(in.Request.Tenant)),
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

// subValues caches the OPA form of the whole caller and target objects (for a
// policy that reads them whole) by a digest of their content: a caller that comes
// back and a configured target are converted once, not on every decision. A
// caller seen once (a token minted per request) only passes through the cache's
// small probation segment. Content-addressed, so entries are shared safely
// across engines and policy revisions; OPA never mutates input values.
// mustCache is a cache with constant bounds, which New never refuses.
func mustCache(c *segcache.Cache[[32]byte, ast.Value], err error) *segcache.Cache[[32]byte, ast.Value] {
	if err != nil {
		panic("authz: " + err.Error())
	}
	return c
}

var subValues = mustCache(segcache.New[[32]byte, ast.Value](4096, 16<<20, valueBytes))

// valueBytes estimates the heap of a converted value from its text length.
func valueBytes(v ast.Value) int { return 256 + 12*v.StringLength() }

// memo returns the cached value under key, building and caching it on a miss.
func memo(key [32]byte, build func() ast.Value) ast.Value {
	if v, ok := subValues.Get(key); ok {
		return v
	}
	v := build()
	subValues.Add(key, v)
	return v
}

// digestOf hashes a tag and strings with length prefixes.
func digestOf(tag byte, fields ...string) [32]byte {
	h := sha256.New()
	h.Write([]byte{tag})
	var n [4]byte
	for _, f := range fields {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func (c *InputCaller) value() ast.Value {
	cd := c.claimsDigest
	if cd == ([32]byte{}) {
		cd = identity.DigestClaims(c.Claims)
	}
	fields := []string{strconv.FormatBool(c.Authenticated), c.Method, c.Issuer, c.AgentID, c.UserID, c.Tenant,
		string(cd[:]), strconv.Itoa(len(c.Scopes))}
	fields = append(append(append(fields, c.Scopes...), strconv.Itoa(len(c.Chain))), c.Chain...)
	return memo(digestOf('c', fields...), c.build)
}

func (c *InputCaller) build() ast.Value {
	claims, err := ast.InterfaceToValue(c.Claims)
	if err != nil {
		claims = ast.NewObject()
	}
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
	fields := []string{t.Name, t.Owner, t.MaxClassification, strconv.FormatBool(t.PushNotifications), strconv.Itoa(len(t.Tenants))}
	fields = append(append(append(fields, t.Tenants...), strconv.Itoa(len(t.SecuritySchemes))), t.SecuritySchemes...)
	for _, s := range t.Skills {
		fields = append(append(fields, "skill", s.ID, strconv.Itoa(len(s.Tags))), s.Tags...)
	}
	return memo(digestOf('t', fields...), t.build)
}

func (t *InputTarget) skillsValue() ast.Value {
	skills := make([]*ast.Term, len(t.Skills))
	for i, s := range t.Skills {
		skills[i] = ast.NewTerm(ast.NewObject(item("id", ast.String(s.ID)), item("tags", stringArray(s.Tags))))
	}
	return ast.NewArray(skills...)
}

func (t *InputTarget) build() ast.Value {
	return ast.NewObject(
		item("name", ast.String(t.Name)),
		item("owner", ast.String(t.Owner)),
		item("tenants", stringArray(t.Tenants)),
		item("max_data_classification", ast.String(t.MaxClassification)),
		item("security_schemes", stringArray(t.SecuritySchemes)),
		item("skills", t.skillsValue()),
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
	return ast.Item(keyTerm(key), ast.NewTerm(v))
}

func stringArray(ss []string) ast.Value {
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = ast.StringTerm(s)
	}
	return ast.NewArray(terms...)
}
