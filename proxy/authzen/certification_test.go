package authzen_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/proxy/authzen"
)

// The AuthZEN Authorization API 1.0 certification scenario
// (openid/authzen certification/authorization-api-1_0-scenario.md) against
// the certification application (testdata/authzen/policies/certification,
// the scenario's required fixture), over HTTPS: every test of the levels
// Basic (Core and Properties), Batch (Core and Properties), Search (Core
// and Properties) and Discovery, each request as the scenario gives it.

// certCase is one test of the scenario.
type certCase struct {
	id, endpoint, body string
	status             int
	// decision is the expected decision (nil: not checked); decisions the
	// expected batch decisions (nil: not checked; count, the array's length).
	decision  *bool
	decisions []bool
	count     int
	// includes are results a search must include ("type/id", or an action's
	// name); none, when empty is true, must be returned.
	includes []string
	empty    bool
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

var certCases = []certCase{
	// C.2 Basic: Access Evaluation.
	{id: "c-2-2-1", endpoint: "evaluation", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-2-2", endpoint: "evaluation", status: 200, decision: no(),
		body: `{"subject": {"type": "user", "id": "bob"}, "action": {"name": "write"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-2-3", endpoint: "evaluation", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"},
			"context": {"time": "2025-06-27T18:03-07:00", "ip": "192.168.1.1"}}`},
	{id: "c-2-2-4", endpoint: "evaluation", status: 200, decision: no(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "write"},
			"resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}}}`},
	{id: "c-2-2-5", endpoint: "evaluation", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "bob", "properties": {"role": "admin"}}, "action": {"name": "write"},
			"resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}}}`},
	{id: "c-2-2-6", endpoint: "evaluation", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "delete", "properties": {"soft": true}},
			"resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-2-7", endpoint: "evaluation", status: 200, decision: no(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "delete", "properties": {"soft": false}},
			"resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-2-8", endpoint: "evaluation", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice", "properties": {"department": "Sales", "role": "manager"}},
			"action": {"name": "read", "properties": {"method": "GET"}},
			"resource": {"type": "record", "id": "record-1", "properties": {"status": "active", "owner": "bob"}}}`},
	{id: "c-2-2-9", endpoint: "evaluation", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"},
			"foo": "bar", "futureField": {"nested": true}}`},
	{id: "c-2-4-1 subject", endpoint: "evaluation", status: 400,
		body: `{"action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-4-1 action", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user", "id": "alice"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-4-1 resource", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}}`},
	{id: "c-2-4-2 subject.type", endpoint: "evaluation", status: 400,
		body: `{"subject": {"id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-4-2 subject.id", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-4-2 action.name", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-4-2 resource.type", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"id": "record-1"}}`},
	{id: "c-2-4-2 resource.id", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record"}}`},
	{id: "c-2-4-4", endpoint: "evaluation", status: 400, body: `{"subject": {"type": "user", "id": "alice"`},
	{id: "c-2-4-5", endpoint: "evaluation", status: 400, body: ``},
	{id: "c-2-4-6 subject", endpoint: "evaluation", status: 400,
		body: `{"subject": "alice", "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-2-4-6 action.name", endpoint: "evaluation", status: 400,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": 123}, "resource": {"type": "record", "id": "record-1"}}`},

	// C.3 Batch: Access Evaluations.
	{id: "c-3-2-1", endpoint: "evaluations", status: 200, count: 2,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"},
			"evaluations": [{"resource": {"type": "record", "id": "record-1"}}, {"resource": {"type": "record", "id": "record-2"}}]}`},
	{id: "c-3-2-2", endpoint: "evaluations", status: 200, decisions: []bool{true, false},
		body: `{"subject": {"type": "user", "id": "bob"}, "resource": {"type": "record", "id": "record-1"},
			"evaluations": [{"action": {"name": "read"}}, {"action": {"name": "write"}}]}`},
	{id: "c-3-2-3", endpoint: "evaluations", status: 200, decisions: []bool{true, false},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "write"},
			"evaluations": [{"resource": {"type": "record", "id": "record-1", "properties": {"status": "active"}}},
				{"resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}}}]}`},
	{id: "c-3-2-4", endpoint: "evaluations", status: 200, decisions: []bool{false, true},
		body: `{"action": {"name": "write"}, "resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}},
			"evaluations": [{"subject": {"type": "user", "id": "alice"}},
				{"subject": {"type": "user", "id": "bob", "properties": {"role": "admin"}}}]}`},
	{id: "c-3-2-5", endpoint: "evaluations", status: 200, decisions: []bool{true, false},
		body: `{"evaluations": [
			{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}},
			{"subject": {"type": "user", "id": "bob"}, "action": {"name": "write"}, "resource": {"type": "record", "id": "record-1"}}]}`},
	{id: "c-3-2-6", endpoint: "evaluations", status: 200, count: 2,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "context": {"time": "2025-06-27T18:03-07:00"},
			"evaluations": [{"resource": {"type": "record", "id": "record-1"}},
				{"resource": {"type": "record", "id": "record-2"}, "context": {"time": "2025-06-27T19:00-07:00", "source": "batch-override"}}]}`},
	{id: "c-3-2-7", endpoint: "evaluations", status: 200, decisions: []bool{true, false},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "write"},
			"resource": {"type": "record", "id": "record-1", "properties": {"status": "active"}},
			"evaluations": [{}, {"resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}}}]}`},
	{id: "c-3-4-1", endpoint: "evaluations", status: 200, decisions: []bool{true, false},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "options": {"evaluations_semantic": "execute_all"},
			"evaluations": [{"resource": {"type": "record", "id": "record-1"}}, {}]}`},
	{id: "c-3-4-2", endpoint: "evaluations", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-3-4-3", endpoint: "evaluations", status: 200, decision: yes(),
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"},
			"evaluations": []}`},

	// C.4 Search.
	{id: "c-4-2-1", endpoint: "search/subject", status: 200, includes: []string{"user/alice", "user/bob"},
		body: `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-2-2", endpoint: "search/subject", status: 200, includes: []string{"user/alice", "user/bob"},
		body: `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"},
			"context": {"time": "2025-06-27T18:03-07:00", "ip": "192.168.1.1"}}`},
	{id: "c-4-2-3", endpoint: "search/subject", status: 200, includes: []string{"user/alice", "user/bob"},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-2-4", endpoint: "search/subject", status: 200, includes: []string{"user/bob"},
		body: `{"subject": {"type": "user"}, "action": {"name": "write"},
			"resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}}}`},
	{id: "c-4-3-1", endpoint: "search/resource", status: 200, includes: []string{"record/record-1"},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record"}}`},
	{id: "c-4-3-2", endpoint: "search/resource", status: 200, includes: []string{"record/record-1"},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record"},
			"context": {"time": "2025-06-27T18:03-07:00", "ip": "192.168.1.1"}}`},
	{id: "c-4-3-3", endpoint: "search/resource", status: 200, includes: []string{"record/record-1"},
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-3-4", endpoint: "search/resource", status: 200, includes: []string{"record/record-2"},
		body: `{"subject": {"type": "user", "id": "bob", "properties": {"role": "admin"}}, "action": {"name": "write"},
			"resource": {"type": "record"}}`},
	{id: "c-4-4-1", endpoint: "search/action", status: 200, includes: []string{"read", "write"},
		body: `{"subject": {"type": "user", "id": "alice"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-4-2", endpoint: "search/action", status: 200, includes: []string{"read", "write"},
		body: `{"subject": {"type": "user", "id": "alice"}, "resource": {"type": "record", "id": "record-1"},
			"context": {"time": "2025-06-27T18:03-07:00", "ip": "192.168.1.1"}}`},
	{id: "c-4-4-3", endpoint: "search/action", status: 200, includes: []string{"write"},
		body: `{"subject": {"type": "user", "id": "bob", "properties": {"role": "admin"}},
			"resource": {"type": "record", "id": "record-2", "properties": {"status": "archived"}}}`},
	{id: "c-4-5-1", endpoint: "search/subject", status: 200,
		body: `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}, "page": {"limit": 1}}`},
	{id: "c-4-6-1", endpoint: "search/action", status: 200, empty: true,
		body: `{"subject": {"type": "user", "id": "nonexistent-user"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-6-2", endpoint: "search/subject", status: 200, empty: true,
		body: `{"subject": {"type": "spaceship"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-6 resource, unknown type", endpoint: "search/resource", status: 200, empty: true,
		body: `{"subject": {"type": "user", "id": "alice"}, "action": {"name": "read"}, "resource": {"type": "spaceship"}}`},
	{id: "c-4-7-1 subject search", endpoint: "search/subject", status: 400,
		body: `{"subject": {"type": "user"}, "resource": {"type": "record", "id": "record-1"}}`},
	{id: "c-4-7-1 resource search", endpoint: "search/resource", status: 400,
		body: `{"action": {"name": "read"}, "resource": {"type": "record"}}`},
	{id: "c-4-7-1 action search", endpoint: "search/action", status: 400, body: `{"subject": {"type": "user", "id": "alice"}}`},
	{id: "c-4-7-2 subject search", endpoint: "search/subject", status: 400,
		body: `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record"}}`},
	{id: "c-4-7-2 resource search", endpoint: "search/resource", status: 400,
		body: `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record"}}`},
	{id: "c-4-7-2 action search", endpoint: "search/action", status: 400,
		body: `{"subject": {"type": "user"}, "resource": {"type": "record", "id": "record-1"}}`},
}

// TestCertification runs every test of the certification scenario's levels
// Basic, Batch, Search and Discovery against writ over HTTPS.
func TestCertification(t *testing.T) {
	w := newWorld(t, nil)
	cert, pool := selfSigned(t)
	w.pdp = w.door(&authzen.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	w.base = "https://" + w.pdp.Addr() + "/certification"
	w.client = &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for _, c := range certCases {
		t.Run(c.id, func(t *testing.T) {
			w.t = t
			// C.2.5: the request id is echoed on every answer, errors included.
			hdr := map[string]string{"Authorization": "Bearer " + w.pep, "Content-Type": "application/json",
				"X-Request-ID": "cert-" + c.id}
			var body any
			if c.body != "" {
				body = c.body
			}
			a := w.do(http.MethodPost, "/access/v1/"+c.endpoint, body, hdr)
			if a.status != c.status || a.header.Get("X-Request-ID") != "cert-"+c.id {
				t.Fatalf("%d (X-Request-ID %q) %s, want %d", a.status, a.header.Get("X-Request-ID"), a.body, c.status)
			}
			if c.status != 200 {
				return
			}
			// C.5: 200 and application/json.
			if ct := a.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			checkCertAnswer(t, c, a.json(t))
			if c.id == "c-2-2-1" {
				// C.2.6: the same request, the same decision, again and again.
				for range 5 {
					if again := w.do(http.MethodPost, "/access/v1/"+c.endpoint, body, hdr); string(again.body) != string(a.body) {
						t.Errorf("not idempotent: %s, then %s", a.body, again.body)
					}
				}
			}
		})
	}
	w.t = t
	t.Run("c-2-4-3 content type", func(t *testing.T) {
		a := w.do(http.MethodPost, "/access/v1/evaluation", certCases[0].body, map[string]string{"Authorization": "Bearer " + w.pep,
			"Content-Type": "text/plain"})
		if a.status != 400 {
			t.Errorf("%d %s", a.status, a.body)
		}
	})
	t.Run("c-2-5-2 no request id", func(t *testing.T) {
		a := w.post("/access/v1/evaluation", certCases[0].body)
		if a.status != 200 || a.header.Get("X-Request-ID") != "" {
			t.Errorf("%d %q", a.status, a.header.Get("X-Request-ID"))
		}
	})
	t.Run("c-4-5-2 page token", func(t *testing.T) { certPaging(t, w) })
	t.Run("c-6 discovery", func(t *testing.T) { certDiscovery(t, w, "https://"+w.pdp.Addr(), "/certification") })
}

// checkCertAnswer checks a 200 answer against the case.
func checkCertAnswer(t *testing.T, c certCase, m map[string]any) {
	t.Helper()
	if ctx, ok := m["context"]; ok {
		if _, obj := ctx.(map[string]any); !obj {
			t.Errorf("C.2.3.2: context %v is not an object", ctx) // C.2.3.2
		}
	}
	if c.decision != nil {
		if d, ok := m["decision"].(bool); !ok || d != *c.decision || m["evaluations"] != nil {
			t.Errorf("answer %v, want decision %v", m, *c.decision)
		}
	}
	if c.decisions != nil || c.count > 0 {
		list, _ := m["evaluations"].([]any)
		want := max(c.count, len(c.decisions))
		if len(list) != want || m["decision"] != nil {
			t.Fatalf("evaluations %v, want %d of them (and no top-level decision)", m, want)
		}
		for i, item := range list {
			obj, _ := item.(map[string]any)
			d, ok := obj["decision"].(bool)
			if !ok || (c.decisions != nil && d != c.decisions[i]) {
				t.Errorf("evaluations[%d] = %v, want %v", i, item, c.decisions)
			}
		}
	}
	if strings.HasPrefix(c.endpoint, "search/") {
		results, ok := m["results"].([]any)
		if !ok {
			t.Fatalf("no results array: %v", m)
		}
		var got []string
		for _, r := range results {
			e, _ := r.(map[string]any)
			if c.endpoint == "search/action" {
				got = append(got, authzen.Str(e, "name"))
				continue
			}
			if authzen.Str(e, "id") == "" || authzen.Str(e, "type") == "" {
				t.Errorf("result %v lacks type or id", r)
			}
			got = append(got, authzen.Str(e, "type")+"/"+authzen.Str(e, "id"))
		}
		for _, want := range c.includes {
			if !slices.Contains(got, want) {
				t.Errorf("results %v lack %s", got, want)
			}
		}
		if c.empty && len(got) != 0 {
			t.Errorf("results %v, want none", got)
		}
		if p, ok := m["page"]; ok {
			obj, isObj := p.(map[string]any)
			if _, isStr := obj["next_token"].(string); !isObj || !isStr {
				t.Errorf("page %v", p)
			}
		}
	}
}

// certPaging: C.4.5.1 and C.4.5.2 with a page of one: the token leads to
// the next page, the last page's token is empty, and the pages together
// are the whole result set.
func certPaging(t *testing.T, w *world) {
	req := raw(t, `{"subject": {"type": "user"}, "action": {"name": "read"}, "resource": {"type": "record", "id": "record-1"}, "page": {"limit": 1}}`)
	var all []string
	for i := 0; i < 5; i++ {
		a := w.post("/access/v1/search/subject", req)
		m := a.json(t)
		page, ok := m["page"].(map[string]any)
		results, _ := m["results"].([]any)
		if a.status != 200 || !ok || len(results) > 1 {
			t.Fatalf("page %d: %d %s", i, a.status, a.body)
		}
		for _, r := range results {
			all = append(all, authzen.Str(r.(map[string]any), "id"))
		}
		next, _ := page["next_token"].(string)
		if next == "" {
			break
		}
		req["page"] = map[string]any{"token": next}
	}
	if !slices.Equal(all, []string{"alice", "bob"}) {
		t.Errorf("pages gave %v", all)
	}
}

// certDiscovery: C.6, the metadata document of the decision point whose
// base URL is origin+path.
func certDiscovery(t *testing.T, w *world, origin, path string) {
	a := w.do(http.MethodGet, origin+"/.well-known/authzen-configuration"+path, nil, nil)
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	var doc map[string]any
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["policy_decision_point"] != origin+path {
		t.Errorf("policy_decision_point %v, want %s", doc["policy_decision_point"], origin+path)
	}
	for _, k := range []string{"access_evaluation_endpoint", "access_evaluations_endpoint", "search_subject_endpoint",
		"search_resource_endpoint", "search_action_endpoint"} {
		s, _ := doc[k].(string)
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || !strings.HasPrefix(s, origin+path+"/access/v1/") {
			t.Errorf("%s = %q", k, s)
		}
	}
	if a.status == 200 && a.header.Get("X-Request-ID") != "" {
		t.Errorf("an id nobody sent was echoed")
	}
}

// selfSigned is a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "writ-authzen-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
