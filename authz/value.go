package authz

import (
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/writ-authz/writ/authz/internal/segcache"
)

// The OPA value of the input is written member by member, without a JSON
// round trip, by the code fieldgen generates from the input's types into
// fields_gen.go (valueInput and its kin); this file holds the helpers that
// code calls. TestValueMatchesJSON and TestFieldTable keep the conversion
// equal to the value OPA derives from the struct's JSON form.

// Value converts the input to an OPA value directly, member by member, so a
// decision costs no JSON encoding and decoding.
func (in *Input) Value() ast.Value { return valueInput(in) }

// subValues caches the OPA form of the whole caller and target objects (the
// types whose member carries writ:"memo", for a policy that reads them
// whole) by a digest of their content: a caller that comes back and a
// configured target are converted once, not on every decision. A caller
// seen once (a token minted per request) only passes through the cache's
// small probation segment. Content-addressed, so entries are shared safely
// across engines and policy revisions; OPA never mutates input values.
var subValues = mustCache(segcache.New[[32]byte, ast.Value](4096, 16<<20, valueBytes))

// mustCache is a cache with constant bounds, which New never refuses.
func mustCache(c *segcache.Cache[[32]byte, ast.Value], err error) *segcache.Cache[[32]byte, ast.Value] {
	if err != nil {
		panic("authz: " + err.Error())
	}
	return c
}

// valueBytes estimates the heap of a converted value from its text length.
func valueBytes(v ast.Value) int { return 256 + 12*v.StringLength() }

// memo returns the value cached under key d, building it from x and caching
// it on a miss.
func memo[T any](x *T, d [32]byte, build func(*T) ast.Value) ast.Value {
	if v, ok := subValues.Get(d); ok {
		return v
	}
	v := build(x)
	subValues.Add(d, v)
	return v
}

// digestOf is a digest of x's key encoding (enc) under a tag naming its type.
func digestOf[T any](tag string, x *T, enc func(*keyEnc, *T)) [32]byte {
	e := getKeyEnc()
	e.s(tag)
	enc(e, x)
	return e.sum()
}

func item(key string, v ast.Value) [2]*ast.Term {
	return ast.Item(keyTerm(key), ast.NewTerm(v))
}

// keyTerms are the input's member names as terms, made once: an object key is
// never mutated, so every input can share them.
var keyTerms = func() map[string]*ast.Term {
	m := make(map[string]*ast.Term, len(fieldNamesInput))
	for _, f := range fieldNamesInput {
		m[f] = ast.StringTerm(f)
	}
	return m
}()

func keyTerm(k string) *ast.Term {
	if t, ok := keyTerms[k]; ok {
		return t
	}
	return ast.StringTerm(k)
}

// stringArray is a list of strings as an OPA array (a nil list as an empty
// one: BuildInput never leaves a list nil).
func stringArray(ss []string) ast.Value {
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = ast.StringTerm(s)
	}
	return ast.NewArray(terms...)
}

// objectValue is a free-form object (the caller's claims) as an OPA value; one
// OPA cannot convert is an empty object.
func objectValue(m map[string]any) ast.Value {
	v, err := ast.InterfaceToValue(m)
	if err != nil {
		return ast.NewObject()
	}
	return v
}

// objectPruned converts the members of a free-form object the policy reads:
// all of them, or only the top-level members sub names.
func objectPruned(m map[string]any, sub shape) ast.Value {
	if len(sub) == 0 {
		return objectValue(m)
	}
	obj := ast.NewObject()
	for k := range sub {
		raw, ok := m[k]
		if !ok {
			continue
		}
		if v, err := ast.InterfaceToValue(raw); err == nil {
			obj.Insert(keyTerm(k), ast.NewTerm(v))
		}
	}
	return obj
}
