package authzen_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/proxy/authzen"
)

// Every example request and response of the specification's evaluation,
// evaluations, search, metadata and transport sections (openid/authzen
// api/authorization-api-1_0.md), answered by the specexamples application
// (testdata/authzen/policies/specexamples: the examples' entities). Where
// the specification shows the response, writ's is that response: exactly,
// or, where it shows an opaque token or a context that is the
// implementation's own (§5.5.1), in decisions, results and page counts.

// specExample is one example.
type specExample struct {
	name, endpoint, request string
	// response is the example's response ("" where the specification shows
	// none: the answer's structure is checked).
	response string
	// compare: "exact" (the whole body), "decisions" (the evaluations'
	// decisions), "results" (the results, in order), "includes" (the
	// results include the example's), "structure".
	compare string
	// count is the evaluations expected when no response is shown.
	count int
}

var specExamples = []specExample{
	{name: "§6.1 Access Evaluation request", endpoint: "evaluation", compare: "structure",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "resource": {"type": "account", "id": "123"},
			"action": {"name": "can_read", "properties": {"method": "GET"}}, "context": {"time": "1985-10-26T01:22-07:00"}}`},
	{name: "§7.1 three requests without defaults", endpoint: "evaluations", compare: "structure", count: 3,
		request: `{"evaluations": [
			{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "can_read"},
			 "resource": {"type": "document", "id": "boxcarring.md"}, "context": {"time": "2024-05-31T15:22-07:00"}},
			{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "can_read"},
			 "resource": {"type": "document", "id": "subject-search.md"}, "context": {"time": "2024-05-31T15:22-07:00"}},
			{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "can_read"},
			 "resource": {"type": "document", "id": "resource-search.md"}, "context": {"time": "2024-05-31T15:22-07:00"}}]}`},
	{name: "§7.1.1 one subject and context as defaults", endpoint: "evaluations", compare: "structure", count: 3,
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "context": {"time": "2024-05-31T15:22-07:00"},
			"evaluations": [
			{"action": {"name": "can_read"}, "resource": {"type": "document", "id": "boxcarring.md"}},
			{"action": {"name": "can_read"}, "resource": {"type": "document", "id": "subject-search.md"}},
			{"action": {"name": "can_read"}, "resource": {"type": "document", "id": "resource-search.md"}}]}`},
	{name: "§7.1.1 a default action overridden; §7.2.1 and §10.1.4 its response", endpoint: "evaluations", compare: "exact",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "context": {"time": "2024-05-31T15:22-07:00"},
			"action": {"name": "can_read"}, "evaluations": [
			{"resource": {"type": "document", "id": "boxcarring.md"}},
			{"resource": {"type": "document", "id": "subject-search.md"}},
			{"action": {"name": "can_edit"}, "resource": {"type": "document", "id": "resource-search.md"}}]}`,
		response: `{"evaluations": [{"decision": true},
			{"decision": false, "context": {"error": {"status": 404, "message": "Resource not found"}}},
			{"decision": false, "context": {"reason": "Subject is a viewer of the resource"}}]}`},
	{name: "§7.1.2 options", endpoint: "evaluations", compare: "structure", count: 1,
		request: `{"evaluations": [{"resource": {"type": "doc", "id": "1"}, "subject": {"type": "doc", "id": "2"}}],
			"options": {"evaluations_semantic": "execute_all", "another_option": "value"}}`},
	{name: "§7.1.2.1 execute_all", endpoint: "evaluations", compare: "exact",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "read"},
			"options": {"evaluations_semantic": "execute_all"}, "evaluations": [
			{"resource": {"type": "document", "id": "1"}}, {"resource": {"type": "document", "id": "2"}},
			{"resource": {"type": "document", "id": "3"}}]}`,
		response: `{"evaluations": [{"decision": true}, {"decision": false}, {"decision": true}]}`},
	{name: "§7.1.2.1 deny_on_first_deny", endpoint: "evaluations", compare: "decisions",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "read"},
			"options": {"evaluations_semantic": "deny_on_first_deny"}, "evaluations": [
			{"resource": {"type": "document", "id": "1"}}, {"resource": {"type": "document", "id": "2"}},
			{"resource": {"type": "document", "id": "3"}}]}`,
		response: `{"evaluations": [{"decision": true}, {"decision": false, "context": {"code": "200", "reason": "deny_on_first_deny"}}]}`},
	{name: "§7.1.2.1 permit_on_first_permit", endpoint: "evaluations", compare: "exact",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "read"},
			"options": {"evaluations_semantic": "permit_on_first_permit"}, "evaluations": [
			{"resource": {"type": "document", "id": "1"}}, {"resource": {"type": "document", "id": "2"}},
			{"resource": {"type": "document", "id": "3"}}]}`,
		response: `{"evaluations": [{"decision": true}]}`},
	{name: "§8.4 and §10.1.4 Subject Search", endpoint: "search/subject", compare: "results",
		request:  `{"subject": {"type": "user"}, "action": {"name": "can_read"}, "resource": {"type": "account", "id": "123"}}`,
		response: `{"results": [{"type": "user", "id": "alice@example.com"}, {"type": "user", "id": "bob@example.com"}]}`},
	{name: "§8.4 Subject Search with context", endpoint: "search/subject", compare: "results",
		request: `{"subject": {"type": "user"}, "action": {"name": "can_read"}, "resource": {"type": "account", "id": "123"},
			"context": {"time": "2024-10-26T01:22-07:00"}}`,
		response: `{"results": [{"type": "user", "id": "alice@example.com"}, {"type": "user", "id": "bob@example.com"}]}`},
	{name: "§8.5 and §10.1.4 Resource Search", endpoint: "search/resource", compare: "includes",
		request:  `{"subject": {"type": "user", "id": "alice@example.com"}, "action": {"name": "can_read"}, "resource": {"type": "account"}}`,
		response: `{"results": [{"type": "account", "id": "123"}, {"type": "account", "id": "456"}]}`},
	{name: "§8.6 and §10.1.4 Action Search", endpoint: "search/action", compare: "results",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "resource": {"type": "account", "id": "123"},
			"context": {"time": "2024-10-26T01:22-07:00"}}`,
		response: `{"results": [{"name": "can_read"}, {"name": "can_write"}]}`},
	{name: "§10.1.4 Access Evaluation", endpoint: "evaluation", compare: "exact",
		request: `{"subject": {"type": "user", "id": "alice@example.com"}, "resource": {"type": "todo", "id": "1"},
			"action": {"name": "can_read"}, "context": {"time": "1985-10-26T01:22-07:00"}}`,
		response: `{"decision": true}`},
}

// TestSpecExamples answers every example, with the request id of §10.1.3's
// example echoed.
func TestSpecExamples(t *testing.T) {
	w := newWorld(t, nil)
	w.base += "/spec"
	const rid = "bfe9eb29-ab87-4ca3-be83-a1d5d8305716"
	for _, ex := range specExamples {
		t.Run(ex.name, func(t *testing.T) {
			w.t = t
			a := w.do(http.MethodPost, "/access/v1/"+ex.endpoint, ex.request, map[string]string{
				"Authorization": "Bearer " + w.pep, "Content-Type": "application/json", "X-Request-ID": rid})
			if a.status != 200 || a.header.Get("Content-Type") != "application/json" || a.header.Get("X-Request-ID") != rid {
				t.Fatalf("%d %q %q %s", a.status, a.header.Get("Content-Type"), a.header.Get("X-Request-ID"), a.body)
			}
			got := a.json(t)
			var want map[string]any
			if ex.response != "" {
				want = raw(t, ex.response)
			}
			switch ex.compare {
			case "exact":
				if jsonText(t, got) != jsonText(t, want) {
					t.Errorf("\n got %s\nwant %s", a.body, jsonText(t, want))
				}
			case "decisions":
				if g, e := decisionsOf(got), decisionsOf(want); !slices.Equal(g, e) {
					t.Errorf("decisions %v, want %v (%s)", g, e, a.body)
				}
			case "results", "includes":
				g, e := resultKeys(t, got), resultKeys(t, want)
				if ex.compare == "results" && !slices.Equal(g, e) {
					t.Errorf("results %v, want %v", g, e)
				}
				for _, k := range e {
					if !slices.Contains(g, k) {
						t.Errorf("results %v lack %s", g, k)
					}
				}
			case "structure":
				if ex.endpoint == "evaluation" {
					if _, ok := got["decision"].(bool); !ok {
						t.Errorf("no decision: %s", a.body)
					}
				} else if list, _ := got["evaluations"].([]any); len(list) != ex.count {
					t.Errorf("%d evaluations, want %d: %s", len(list), ex.count, a.body)
				}
			}
		})
	}
	w.t = t
	t.Run("§8.2.3 pagination", func(t *testing.T) { specPaging(t, w) })
	t.Run("§9.2.2 metadata", func(t *testing.T) {
		a := w.do(http.MethodGet, "http://"+w.pdp.Addr()+"/.well-known/authzen-configuration/spec", nil, nil)
		var doc map[string]string
		if a.status != 200 || a.header.Get("Content-Type") != "application/json" || json.Unmarshal(a.body, &doc) != nil {
			t.Fatalf("%d %s", a.status, a.body)
		}
		base := "http://" + w.pdp.Addr() + "/spec"
		// The example's members, and access_evaluations_endpoint and the
		// action search, which this decision point offers too.
		want := map[string]string{"policy_decision_point": base, "access_evaluation_endpoint": base + "/access/v1/evaluation",
			"access_evaluations_endpoint": base + "/access/v1/evaluations", "search_subject_endpoint": base + "/access/v1/search/subject",
			"search_resource_endpoint": base + "/access/v1/search/resource", "search_action_endpoint": base + "/access/v1/search/action"}
		if jsonText(t, doc) != jsonText(t, want) {
			t.Errorf("%v, want %v", doc, want)
		}
	})
	t.Run("§11.3 401 with WWW-Authenticate", func(t *testing.T) {
		a := w.do(http.MethodPost, "/access/v1/evaluation", specExamples[0].request, map[string]string{"Content-Type": "application/json"})
		if a.status != 401 || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer realm=") {
			t.Errorf("%d %q", a.status, a.header.Get("WWW-Authenticate"))
		}
	})
}

// specPaging: §8.2.3, three results in pages of two: the first page with a
// token, count 2 and total 3; the second, asked with the token alone, with
// the last result, an empty token, count 1 and total 3.
func specPaging(t *testing.T, w *world) {
	first := w.post("/access/v1/search/resource", `{"subject": {"type": "user", "id": "alice@example.com"},
		"action": {"name": "can_read"}, "resource": {"type": "account"}, "page": {"limit": 2}}`)
	var p1 authzen.SearchResponse
	if first.status != 200 || json.Unmarshal(first.body, &p1) != nil || p1.Page == nil {
		t.Fatalf("%d %s", first.status, first.body)
	}
	if p1.Page.NextToken == "" || p1.Page.Count != 2 || p1.Page.Total != 3 || len(p1.Results) != 2 ||
		authzen.Str(p1.Results[0], "id") != "123" || authzen.Str(p1.Results[1], "id") != "456" {
		t.Errorf("first page %s", first.body)
	}
	if !strings.HasPrefix(string(first.body), `{"page":`) {
		t.Errorf("the page object is not first (§8.3 recommends it): %s", first.body)
	}
	second := w.post("/access/v1/search/resource", `{"subject": {"type": "user", "id": "alice@example.com"},
		"action": {"name": "can_read"}, "resource": {"type": "account"}, "page": {"token": "`+p1.Page.NextToken+`"}}`)
	var p2 authzen.SearchResponse
	if second.status != 200 || json.Unmarshal(second.body, &p2) != nil || p2.Page == nil {
		t.Fatalf("%d %s", second.status, second.body)
	}
	if p2.Page.NextToken != "" || p2.Page.Count != 1 || p2.Page.Total != 3 || len(p2.Results) != 1 || authzen.Str(p2.Results[0], "id") != "789" {
		t.Errorf("second page %s", second.body)
	}
	// §8.2: a token with another search is refused.
	other := w.post("/access/v1/search/resource", `{"subject": {"type": "user", "id": "bob@example.com"},
		"action": {"name": "can_read"}, "resource": {"type": "account"}, "page": {"token": "`+p1.Page.NextToken+`"}}`)
	if other.status != 400 {
		t.Errorf("a token reused for another search: %d %s", other.status, other.body)
	}
}

func decisionsOf(m map[string]any) []bool {
	list, _ := m["evaluations"].([]any)
	var out []bool
	for _, item := range list {
		obj, _ := item.(map[string]any)
		d, _ := obj["decision"].(bool)
		out = append(out, d)
	}
	return out
}

func resultKeys(t *testing.T, m map[string]any) []string {
	t.Helper()
	list, _ := m["results"].([]any)
	var out []string
	for _, item := range list {
		out = append(out, jsonText(t, item))
	}
	return out
}
