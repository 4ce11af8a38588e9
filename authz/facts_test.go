package authz

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

// TestWithFacts: objects merge key by key, lists join without repeats,
// scalars from the facts win, and the data document is left as it was.
func TestWithFacts(t *testing.T) {
	var docs, facts map[string]any
	mustJSON := func(v any) string {
		t.Helper()
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	if err := json.Unmarshal([]byte(`{"writ":{"config":{"max_delegation_depth":4,"callbacks":{
		"targets":{"a":["x.example"]},"tenants":{"w":["y.example"]},"allow_http_hosts":[]}}}}`), &docs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"writ":{"config":{"max_delegation_depth":3,"callbacks":{
		"targets":{"a":["x.example","z.example"],"b":["b.example"]}}}},"other":true}`), &facts); err != nil {
		t.Fatal(err)
	}
	before := mustJSON(docs)
	got := mustJSON(withFacts(docs, facts))
	want := `{"other":true,"writ":{"config":{"callbacks":{"allow_http_hosts":[],"targets":{"a":["x.example","z.example"],"b":["b.example"]},"tenants":{"w":["y.example"]}},"max_delegation_depth":3}}}`
	if got != want {
		t.Fatalf("merged\n got %s\nwant %s", got, want)
	}
	if after := mustJSON(docs); after != before {
		t.Fatalf("the data document changed: %s", after)
	}
	d1, err1 := factsDigest(facts)
	d2, err2 := factsDigest(map[string]any{"other": false})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if d1 == d2 || len(d1) != 16 {
		t.Fatalf("digests %q %q", d1, d2)
	}
}

// TestFactsInDecisions: a callback host the configuration allows for the
// target (LoadOptions.Facts) is allowed in decisions; the revision names the
// facts; the set's own tests still run on its files alone.
func TestFactsInDecisions(t *testing.T) {
	in := BuildInput(facts(investigator, sanctions))
	in.Push = &InputPush{URL: "https://hooks.example/cb", Scheme: "https", Host: "hooks.example", Port: 443, HasToken: true}
	plain, err := LoadPolicy(context.Background(), []string{shipped}, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withHost := map[string]any{"writ": map[string]any{"config": map[string]any{"callbacks": map[string]any{
		"targets": map[string]any{"sanctions-screening-agent": []any{"hooks.example"}}}}}}
	p, err := LoadPolicy(context.Background(), []string{shipped}, LoadOptions{Facts: withHost})
	if err != nil {
		t.Fatal(err)
	}
	if p.Revision == plain.Revision || p.Tests.Passed != plain.Tests.Passed {
		t.Fatalf("revision %s (plain %s), tests %+v (plain %+v)", p.Revision, plain.Revision, p.Tests, plain.Tests)
	}
	for _, c := range []struct {
		p    *Policy
		want []string
	}{{plain, []string{"CALLBACK_NOT_ALLOWED"}}, {p, nil}} {
		e, _ := NewEngine(c.p, Options{CacheSize: -1})
		d, err := e.Decide(context.Background(), in)
		if err != nil || !slices.Equal(codes(d), c.want) {
			t.Errorf("%s: %v %v, want %v", c.p.Revision, codes(d), err, c.want)
		}
	}
	// The data file's own hosts still count.
	in.Push.Host, in.Push.URL = "agents.bank.ae", "https://agents.bank.ae/cb"
	e, _ := NewEngine(p, Options{CacheSize: -1})
	if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow {
		t.Errorf("the data file's host: %+v %v", d, err)
	}
}
