package proxy_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/writheader"
	"github.com/writ-authz/writ/task"
)

// TestForeignTaskNoDecisionOracle: a foreign task and a missing one answer the
// same, headers included. A missing task is refused before the policy runs (no
// decision), a foreign one by the policy: a Writ-Decision-Id on the second alone
// tells a caller which task ids exist.
//
// Threat: insecure direct object reference: another caller's task read by
// its id, or its existence learnt from the answer. Defence: a foreign task
// is answered exactly like a missing one, headers included.
func TestForeignTaskNoDecisionOracle(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil) // answers every send with task t-1
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	if _, a := h.RPC("/", h.Token(proxytest.Investigator), "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
		t.Fatalf("send: %s", a.Raw)
	}
	retail := h.Token(proxytest.RetailBot)
	get := func(id string) (*http.Response, string) {
		resp, body := h.Do("POST", "/", retail, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "GetTask",
			"params": map[string]any{"id": id}}, map[string]string{"A2A-Version": "1.0"})
		return resp, strings.ReplaceAll(string(body), id, "ID")
	}
	fr, fb := get("t-1")
	mr, mb := get("no-such-task")
	if fr.StatusCode != mr.StatusCode || fb != mb {
		t.Fatalf("bodies differ: foreign %d %s / missing %d %s", fr.StatusCode, fb, mr.StatusCode, mb)
	}
	for _, k := range []string{writheader.Decision, "Content-Type", "Cache-Control"} {
		if (fr.Header.Get(k) == "") != (mr.Header.Get(k) == "") {
			t.Errorf("header %s: foreign %q, missing %q: the foreign task is distinguishable", k, fr.Header.Get(k), mr.Header.Get(k))
		}
	}
}

// TestHiddenCardNoDecisionOracle: a card the caller may not see is a plain 404,
// the same as a path no route serves; a Writ-Decision-Id on it would tell the
// caller the agent exists.
//
// Threat: an agent's existence learnt from its card by a caller who may
// not see it. Defence: a plain 404, the same as for no agent at all.
func TestHiddenCardNoDecisionOracle(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	a := proxytest.SanctionsAgent(up.Srv.URL)
	a.Route = "/sanctions/"
	h := proxytest.New(t, []config.Agent{a}, nil)
	hr, hb := h.Do("GET", "/sanctions/.well-known/agent-card.json", "", nil, nil)
	mr, mb := h.Do("GET", "/no-such-agent/.well-known/agent-card.json", "", nil, nil)
	if hr.StatusCode != 404 || mr.StatusCode != 404 || string(hb) != string(mb) {
		t.Fatalf("hidden %d %s / missing %d %s", hr.StatusCode, hb, mr.StatusCode, mb)
	}
	if hr.Header.Get(writheader.Decision) != mr.Header.Get(writheader.Decision) {
		t.Errorf("hidden card carries %s %q, a missing agent %q", writheader.Decision, hr.Header.Get(writheader.Decision), mr.Header.Get(writheader.Decision))
	}
}

// shippedDenialCodes are the codes the shipped policy's rules produce, read
// from its files, so a rule added later is covered without editing a test.
func shippedDenialCodes(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../policies/*.rego")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"code":\s*"([A-Z_]+)"`)
	codes := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
			codes[m[1]] = true
		}
	}
	if len(codes) < 10 {
		t.Fatalf("only %d codes found in the shipped policy", len(codes))
	}
	return codes
}

// TestDenialNeverNamesTheTarget: for every denial code the shipped policy
// can produce, the refusal a caller receives (status, headers, body; A2A 1.0
// JSON-RPC and HTTP+JSON) never contains the target agent's name, its tenants
// or its classification ceiling — the caller reached it by a route ("/") and
// need not know them — while the decision log keeps the detailed reasons.
//
// Threat: a hidden agent disclosed: its card is a 404 and the directory
// omits it, yet a refused request names it (and its tenants and ceiling) to
// the caller. Defence: the caller-facing refusal carries the codes, neutral
// reasons and the decision id only (DESIGN section 7); the detail goes to the
// decision log.
func TestDenialNeverNamesTheTarget(t *testing.T) {
	const name = "hidden-ledger-zz"
	secret := []string{name, "tenant-alpha-zz", "tenant-beta-zz", "confidential"}
	agent := func(up string, schemes ...string) config.Agent {
		a := proxytest.SanctionsAgent(up)
		a.Name, a.Tenants, a.MaxDataClassification = name, []string{"tenant-alpha-zz", "tenant-beta-zz"}, task.Confidential
		if len(schemes) > 0 {
			a.SecuritySchemes = schemes
		}
		return a
	}
	member := proxytest.Caller{Agent: "ops-bot", User: "u-1", Tenant: "tenant-alpha-zz", Class: "internal", Scopes: "delegate"}
	with := func(f func(*proxytest.Caller)) proxytest.Caller { c := member; f(&c); return c }
	push := func(cfg map[string]any) map[string]any {
		return map[string]any{"message": proxytest.SendParams["message"], "configuration": map[string]any{"taskPushNotificationConfig": cfg}}
	}
	cases := []struct {
		code    string
		schemes []string
		who     *proxytest. // nil: no credentials
			Caller
		params  map[string]any
		foreign bool // a task someone else created first
	}{
		{code: "UNAUTHENTICATED"},
		{code: "DEPTH_EXCEEDED", who: ptr(with(func(c *proxytest.Caller) { c.Chain = []string{"a", "b", "c", "d"} }))},
		{code: "CYCLE_DETECTED", who: ptr(with(func(c *proxytest.Caller) { c.Chain = []string{name} }))},
		{code: "TENANT_NOT_PERMITTED", who: ptr(with(func(c *proxytest.Caller) { c.Tenant = "corporate" }))},
		{code: "CLASSIFICATION_EXCEEDED", who: ptr(with(func(c *proxytest.Caller) { c.Class = "restricted" }))},
		{code: "NO_ACCEPTABLE_AUTH", schemes: []string{"apikey"}, who: &member},
		{code: "CALLBACK_NOT_ALLOWED", who: &member, params: push(map[string]any{"url": "https://evil.example/cb", "token": "t"})},
		{code: "CALLBACK_UNAUTHENTICATED", who: &member, params: push(map[string]any{"url": "https://agents.bank.ae/cb"})},
		{code: "SCOPE_MISSING", who: ptr(with(func(c *proxytest.Caller) { c.Scopes = "read" }))},
		{code: "AUTHORITY_WIDENED", who: ptr(with(func(c *proxytest.Caller) {
			c.Chain, c.ChainScopes = []string{"orchestrator"}, []string{"read"}
		}))},
		{code: "NOT_TASK_OWNER", who: ptr(with(func(c *proxytest.Caller) { c.Agent = "other-bot" })), foreign: true},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			up := proxytest.NewFakeAgent(t, nil)
			h := proxytest.New(t, []config.Agent{agent(up.Srv.URL, c.schemes...)}, nil)
			rec := &recordingSink{}
			h.Bus.Subscribe(rec)
			tok := ""
			if c.who != nil {
				tok = h.Token(*c.who)
			}
			method, params := "SendMessage", c.params
			if params == nil {
				params = proxytest.SendParams
			}
			if c.foreign {
				if _, a := h.RPC("/", h.Token(member), "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
					t.Fatalf("the owner's send: %s", a.Raw)
				}
				method, params = "GetTask", map[string]any{"id": "t-1"}
			}
			v10 := map[string]string{"A2A-Version": "1.0"}
			answers := map[string]func() (*http.Response, []byte){
				"jsonrpc": func() (*http.Response, []byte) {
					return h.Do("POST", "/", tok, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, v10)
				},
				"rest": func() (*http.Response, []byte) {
					if c.foreign {
						return h.Do("GET", "/tasks/t-1", tok, nil, v10)
					}
					return h.Do("POST", "/message:send", tok, params, v10)
				},
			}
			for binding, do := range answers {
				resp, body := do()
				if resp.StatusCode == 200 && !strings.Contains(string(body), `"error"`) {
					t.Fatalf("%s: not refused: %d %s", binding, resp.StatusCode, body)
				}
				seen := string(body) + " " + resp.Status
				for k, vs := range resp.Header {
					seen += " " + k + ": " + strings.Join(vs, ", ")
				}
				for _, s := range secret {
					if strings.Contains(seen, s) {
						t.Errorf("%s: the caller's refusal names %q: %s", binding, s, seen)
					}
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			detailed := false
			for _, d := range rec.decisions {
				for _, den := range d.Denials {
					if den.Code == c.code {
						covered[c.code] = true
						// The policy's own reason, not the neutral one the caller got.
						detailed = detailed || (den.Reason != "" && den.Reason != proxy.PublicReason(den.Code))
					}
				}
			}
			if !covered[c.code] {
				t.Fatalf("the policy did not deny with %s: %+v", c.code, rec.decisions)
			}
			if !detailed && c.code != "UNAUTHENTICATED" { // its reason has nothing to hide
				t.Errorf("the decision log lost the detail of %s: %+v", c.code, rec.decisions)
			}
		})
	}
	for code := range shippedDenialCodes(t) {
		if !covered[code] {
			t.Errorf("no case makes the shipped policy deny with %s", code)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestEveryShippedCodeHasANeutralReason: a code the shipped policy can deny
// with has a reason of its own for the caller, not the generic one a custom
// policy's code gets.
func TestEveryShippedCodeHasANeutralReason(t *testing.T) {
	for code := range shippedDenialCodes(t) {
		if proxy.PublicReason(code) == proxy.PublicReason("A_CODE_NO_POLICY_SHIPS") {
			t.Errorf("%s has no neutral reason of its own (publicReasons)", code)
		}
	}
}
