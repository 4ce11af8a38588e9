package authz

import (
	"encoding/json"
	"testing"
)

// TestWithFacts: objects merge key by key, lists join without repeats,
// scalars from the facts win, and the data document is left as it was.
func TestWithFacts(t *testing.T) {
	var docs, facts map[string]any
	json.Unmarshal([]byte(`{"writ":{"config":{"max_delegation_depth":4,"callbacks":{
		"targets":{"a":["x.example"]},"tenants":{"w":["y.example"]},"allow_http_hosts":[]}}}}`), &docs)
	json.Unmarshal([]byte(`{"writ":{"config":{"max_delegation_depth":3,"callbacks":{
		"targets":{"a":["x.example","z.example"],"b":["b.example"]}}}},"other":true}`), &facts)
	before, _ := json.Marshal(docs)
	got, _ := json.Marshal(withFacts(docs, facts))
	want := `{"other":true,"writ":{"config":{"callbacks":{"allow_http_hosts":[],"targets":{"a":["x.example","z.example"],"b":["b.example"]},"tenants":{"w":["y.example"]}},"max_delegation_depth":3}}}`
	if string(got) != want {
		t.Fatalf("merged\n got %s\nwant %s", got, want)
	}
	if after, _ := json.Marshal(docs); string(after) != string(before) {
		t.Fatalf("the data document changed: %s", after)
	}
	d1, _ := factsDigest(facts)
	d2, _ := factsDigest(map[string]any{"other": false})
	if d1 == d2 || len(d1) != 16 {
		t.Fatalf("digests %q %q", d1, d2)
	}
}
