package egresse2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/writproc"
)

// TestDelegationAcrossThreeWrits is issue 22's test of egress mode, on real
// processes: alice's request to agent A becomes A's delegation to B, and B's
// to C, each hop through its writ's egress listener and the next one's
// ingress; the refusals happen where the issue says, with nothing sent on;
// the three decision logs verify, one edited line does not, and the report
// tells the delegation as one story. The subtests share one world and run in
// order (the last ones stop the writs).
func TestDelegationAcrossThreeWrits(t *testing.T) {
	w := newWorld(t)
	var chainID string // the delegation's, from the token B received

	t.Run("the chain grows by exactly one verified hop", func(t *testing.T) { chainID = w.testChainGrows(t) })
	t.Run("A cannot forge, shorten or widen the chain", w.testNoForgery)
	t.Run("cycle and depth are refused at A's egress", w.testCycleAndDepth)
	t.Run("restricted data to an internal-only agent is refused at egress", w.testClassification)
	t.Run("discovery shows each agent its permitted targets", w.testDiscovery)
	t.Run("an STS that misbehaves is a clear error, nothing forwarded", w.testBadSTS)
	if chainID == "" {
		t.Fatal("no delegation went through: nothing to tell")
	}
	w.stop() // the logs close with their signed checkpoints
	t.Run("the three logs verify, an edited line does not", w.testVerify)
	t.Run("the report tells the three-hop story from the three logs", func(t *testing.T) { w.testStory(t, chainID) })
}

// writCaller is the Writ-Caller header an agent received: who its writ
// verified.
type writCaller struct {
	AgentID string   `json:"agent_id"`
	UserID  string   `json:"user_id"`
	Issuer  string   `json:"issuer"`
	Tenant  string   `json:"tenant"`
	Chain   []string `json:"chain"`
}

// sends are the messages a JS agent received, with the caller its writ
// verified for each.
func (w *world) sends(agentURL string) []writCaller {
	w.t.Helper()
	var out []writCaller
	for _, o := range w.observed(agentURL) {
		if o.Method != "SendMessage" {
			continue
		}
		var c writCaller
		if err := json.Unmarshal([]byte(o.Caller), &c); err != nil {
			w.t.Fatalf("%s got Writ-Caller %q: %v", agentURL, o.Caller, err)
		}
		out = append(out, c)
	}
	return out
}

// testChainGrows: one delegation, alice → portal → agent-a → agent-b →
// agent-c, agent A naming B by its card's URL (/card/...: writ A resolves
// it, the card's signature required) and agent B naming C (/to/agent-c).
// B's writ and C's writ each verified a token of the STS whose act chain is
// the one before it plus the agent that delegated, and all of them carry
// one chain id. It returns the chain id.
func (w *world) testChainGrows(t *testing.T) string {
	ans := w.delegate(w.user("internal"))
	if ans.Status != http.StatusOK || ans.State != "TASK_STATE_COMPLETED" || ans.Text != "delegated to "+w.cardB+": completed "+screened {
		t.Fatalf("the delegation: %d %s %q\n%s", ans.Status, ans.State, ans.Text, ans.Body)
	}
	hops := []struct {
		agent string
		want  writCaller
	}{
		{w.agentA, writCaller{AgentID: portal, UserID: alice, Issuer: idpIssuer, Tenant: tenant}},
		{w.agentB, writCaller{AgentID: agentA, UserID: alice, Issuer: w.sts.URL, Tenant: tenant, Chain: []string{portal}}},
		{w.agentC, writCaller{AgentID: agentB, UserID: alice, Issuer: w.sts.URL, Tenant: tenant, Chain: []string{portal, agentA}}},
	}
	for i, h := range hops {
		got := w.sends(h.agent)
		if len(got) != 1 {
			t.Fatalf("hop %d: the agent received %d messages", i+1, len(got))
		}
		c := got[0]
		if c.AgentID != h.want.AgentID || c.UserID != h.want.UserID || c.Issuer != h.want.Issuer ||
			c.Tenant != h.want.Tenant || !slices.Equal(c.Chain, h.want.Chain) {
			t.Fatalf("hop %d: the agent's writ verified %+v, want %+v", i+1, c, h.want)
		}
	}
	// What left A's host for B: B's card (A names B by it; its signature
	// checked against the key set its jku names), then the message with the
	// STS's token for B, never alice's.
	var send *http.Request
	var card, jku bool
	for _, r := range w.tapB.Requests() {
		switch {
		case r.Method == http.MethodPost:
			send = r
		case r.URL.Path == "/.well-known/agent-card.json":
			card = true
		case r.URL.Path == "/.well-known/writ/jwks.json":
			jku = true
		}
	}
	if !card || !jku {
		t.Fatalf("A's writ did not fetch B's card (%v) and check its signature (%v)", card, jku)
	}
	if send == nil {
		t.Fatal("no message left A's host for B")
	}
	tok := strings.TrimPrefix(send.Header.Get("Authorization"), "Bearer ")
	out, err := w.stsVerify.VerifyFor(tok, "agent:"+agentB)
	if err != nil || out.AgentID != agentA || !slices.Equal(out.Chain, []string{portal}) || out.UserID != alice {
		t.Fatalf("the token A's writ sent B: %+v %v", out, err)
	}
	for _, h := range []string{"Writ-Parent", "Writ-Caller", "Writ-Decision-Id"} {
		if v := send.Header.Get(h); v != "" {
			t.Errorf("writ A sent B its own header %s: %q", h, v)
		}
	}
	if out.ChainID == "" {
		t.Fatal("the token for B carries no chain id")
	}
	return out.ChainID
}

// testNoForgery: agent A holds its own client secret, alice's token and the
// STS's token for B; none of it lets it present B's writ a chain the STS did
// not sign for B, and the STS refuses to sign a wider one, saying why.
// Threat: a delegating agent mints or forwards its own token to the next
// agent — the user's token as it is, one it signed itself naming a shorter
// chain, its own credential at the STS, a token the STS issued for another
// target — or asks the STS for more than it was given. Defence: B's writ
// accepts only tokens of the STS for B's audience (issuer, signature, aud);
// the STS only narrows: wider scope, a higher classification, another tenant
// or a subject token of its own actor are refused with the reason.
func (w *world) testNoForgery(t *testing.T) {
	before := len(w.sends(w.agentB))
	// A forger's key, naming the STS as issuer and a chain without the portal.
	forger, err := devidp.New(t.TempDir(), w.sts.URL, "agent:"+agentB)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := forger.Token(devidp.Caller{Agent: agentA, User: alice, Tenant: tenant, Scope: scope, Classification: "internal"})
	if err != nil {
		t.Fatal(err)
	}
	aliceTok := w.user("internal")
	actorTok := w.stsToken(t, url.Values{"grant_type": {"client_credentials"}}, http.StatusOK)
	forC := w.stsToken(t, exchangeForm(aliceTok, "agent:"+agentC, scope), http.StatusOK)
	for name, tok := range map[string]string{
		"alice's token, forwarded as it is":           aliceTok,
		"a token A signed itself, with a short chain": forged,
		"A's own credential at the STS":               actorTok,
		"the STS's token for another target":          forC,
	} {
		ans := post(t, w.b.URL+"/", tok, message("screen"), nil)
		if ans.Status != http.StatusUnauthorized {
			t.Errorf("%s: B's writ answered %d: %s", name, ans.Status, ans.Body)
		}
	}
	if n := len(w.sends(w.agentB)); n != before {
		t.Fatalf("agent B received %d messages from a forger", n-before)
	}
	for _, c := range []struct {
		name, code, reason string
		form               url.Values
	}{
		{"wider scope", "invalid_scope", "requested scope widens the subject token's: payments:write",
			exchangeForm(aliceTok, "agent:"+agentB, scope+" payments:write")},
		{"a higher classification", "invalid_grant", "requested classification restricted is above the subject token's ceiling internal",
			withParam(exchangeForm(aliceTok, "agent:"+agentB, scope), "classification", "restricted")},
		{"another tenant", "invalid_grant", `an exchange never changes tenant: the subject token's is "t1", "t2" was asked`,
			withParam(exchangeForm(aliceTok, "agent:"+agentB, scope), "tenant", "t2")},
		{"A's own credential as the subject: the chain without alice and the portal", "invalid_grant", "subject token refused",
			exchangeForm(actorTok, "agent:"+agentB, scope)},
	} {
		body := w.stsRefusal(t, c.form)
		if body.Error != c.code || !strings.Contains(body.Description, c.reason) {
			t.Errorf("%s: the STS answered %+v, want %s %q", c.name, body, c.code, c.reason)
		}
	}
}

func exchangeForm(subject, audience, scope string) url.Values {
	return url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token": {subject}, "subject_token_type": {"urn:ietf:params:oauth:token-type:jwt"},
		"audience": {audience}, "scope": {scope}}
}

func withParam(v url.Values, k, value string) url.Values {
	v.Set(k, value)
	return v
}

// stsCall posts form to the STS's token endpoint as agent A (HTTP Basic).
func (w *world) stsCall(t *testing.T, form url.Values) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.sts.URL+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(agentA, secretOf(agentA))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// stsToken is the access token the STS issues for form.
func (w *world) stsToken(t *testing.T, form url.Values, want int) string {
	t.Helper()
	resp, body := w.stsCall(t, form)
	var ok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != want || json.Unmarshal(body, &ok) != nil || ok.AccessToken == "" {
		t.Fatalf("the STS answered %d: %s", resp.StatusCode, body)
	}
	return ok.AccessToken
}

// stsError is an RFC 6749 error answer.
type stsError struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

func (w *world) stsRefusal(t *testing.T, form url.Values) stsError {
	t.Helper()
	resp, body := w.stsCall(t, form)
	var e stsError
	if resp.StatusCode < 400 || json.Unmarshal(body, &e) != nil {
		t.Fatalf("the STS answered %d: %s", resp.StatusCode, body)
	}
	return e
}

// refusedAtEgress checks that agent A's delegation was refused with code,
// and that nothing of it left A's host: B's side saw no request, the STS no
// exchange.
func (w *world) refusedAtEgress(t *testing.T, token, code string) {
	t.Helper()
	sent, exchanged := w.tapB.Count(), w.front.exchanges.Load()
	ans := w.delegate(token)
	t.Logf("agent A: %s", ans.Text)
	if ans.State != "TASK_STATE_FAILED" || !strings.HasPrefix(ans.Text, "delegation refused: ") || !strings.Contains(ans.Text, code) {
		t.Fatalf("agent A reported %s %q, want a refusal naming %s", ans.State, ans.Text, code)
	}
	if n := w.tapB.Count() - sent; n != 0 {
		t.Fatalf("the refused delegation sent %d requests toward B", n)
	}
	if n := w.front.exchanges.Load() - exchanged; n != 0 {
		t.Fatalf("the refused delegation asked the STS for %d tokens", n)
	}
}

// testCycleAndDepth: the chain rules fire at A's egress on the SDK's very
// first call (its card fetch), before any byte leaves A's host.
// Threat: agent A delegates where the chain must stop — back to an agent
// already in it, or one hop too deep — and relies on B's side to notice;
// or its SDK's card fetch, made before the message, carries a token with the
// forbidden chain to B. Defence: every egress call is a hop of the
// delegation for the shipped policy (common.rego's delegating), so
// CYCLE_DETECTED and DEPTH_EXCEEDED refuse the card fetch and the message
// at A's egress: no exchange, no request toward B.
func (w *world) testCycleAndDepth(t *testing.T) {
	w.refusedAtEgress(t, w.user("internal", agentB), "CYCLE_DETECTED")
	w.refusedAtEgress(t, w.user("internal", "x", "y", "z"), "DEPTH_EXCEEDED")
}

// testClassification: alice's request carries restricted data (her token's
// ceiling is restricted, agent A is cleared for it); B is cleared only for
// internal, and A's delegation of it is refused at A's egress.
func (w *world) testClassification(t *testing.T) {
	w.refusedAtEgress(t, w.user("restricted"), "CLASSIFICATION_EXCEEDED")
}

// directory asks an egress listener which targets its agent may delegate
// the request parent names to.
func directory(t *testing.T, egressURL, parent string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, egressURL+"/.well-known/writ/directory", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Writ-Parent", parent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&d) != nil {
		t.Fatalf("the directory of %s: %d", egressURL, resp.StatusCode)
	}
	names := []string{}
	for _, a := range d.Agents {
		names = append(names, a.Name)
	}
	return names
}

// testDiscovery: each agent's egress directory, for the request it is
// serving, lists only the targets it may delegate that request to: A sees B
// for an internal request (not the retail tenant's agent), nothing for a
// restricted one; B sees C, never A (a cycle).
func (w *world) testDiscovery(t *testing.T) {
	w.delegate(w.user("internal"))
	internal, servedB := w.lastParent(w.agentA), w.lastParent(w.agentB)
	w.delegate(w.user("restricted"))
	restricted := w.lastParent(w.agentA)
	for _, c := range []struct {
		who, egress, parent string
		want                []string
	}{
		{"A, an internal request", w.a.EgressURL, internal, []string{agentB}},
		{"A, a restricted request", w.a.EgressURL, restricted, []string{}},
		{"B", w.b.EgressURL, servedB, []string{agentC}},
	} {
		if got := directory(t, c.egress, c.parent); !slices.Equal(got, c.want) {
			t.Errorf("%s: the directory lists %v, want %v", c.who, got, c.want)
		}
	}
}

// testBadSTS: an STS that is down, slow, answers garbage or a token for the
// wrong audience; each time agent A's SDK gets a clear error (its status
// names writ's code), a call of its own sees the kind, and nothing goes
// toward B.
// Threat: a broken or confused STS makes the egress door forward the call
// anyway — without a token, with the inbound one, or with a token for
// another target. Defence: the exchange fails closed with a typed error (the
// answer is checked: a JSON token response, signed by the STS, for the
// audience asked), answered to the agent as 503/502 TOKEN_EXCHANGE_FAILED
// with the kind, and nothing is forwarded.
func (w *world) testBadSTS(t *testing.T) {
	defer w.front.mode.Store("")
	for _, c := range []struct {
		mode, kind string
		status     int
	}{
		{"down", "unavailable", http.StatusServiceUnavailable},
		{"slow", "timeout", http.StatusServiceUnavailable},
		{"garbage", "invalid_answer", http.StatusBadGateway},
		{"wrong_audience", "wrong_audience", http.StatusBadGateway},
	} {
		t.Run(c.mode, func(t *testing.T) {
			w.front.mode.Store(c.mode)
			sent := w.tapB.Count()
			ans := w.delegate(w.user("internal"))
			t.Logf("agent A: %s", ans.Text)
			if ans.State != "TASK_STATE_FAILED" || !strings.Contains(ans.Text, fmt.Sprint(c.status)) ||
				!strings.Contains(ans.Text, "TOKEN_EXCHANGE_FAILED") {
				t.Fatalf("agent A reported %s %q", ans.State, ans.Text)
			}
			// The same call, made by hand: the answer names the kind.
			call := post(t, w.a.EgressURL+"/to/"+agentB+"/", "", message("screen"),
				map[string]string{"Writ-Parent": w.lastParent(w.agentA)})
			if call.Status != c.status || !strings.Contains(call.Body, "TOKEN_EXCHANGE_FAILED") ||
				!strings.Contains(call.Body, `"reason":"`+c.kind+`"`) {
				t.Fatalf("the call answered %d %s, want %d naming %s", call.Status, call.Body, c.status, c.kind)
			}
			if n := w.tapB.Count() - sent; n != 0 {
				t.Fatalf("%d requests went toward B", n)
			}
		})
	}
}

// stop stops the three writs (each closes its decision log with a signed
// checkpoint).
func (w *world) stop() {
	w.t.Helper()
	for _, p := range []*writproc.Proc{w.a, w.b, w.c} {
		if err := p.Stop(); err != nil {
			w.t.Errorf("writ did not stop cleanly: %v", err)
		}
	}
}

// logs are the three writs' decision logs.
func (w *world) logs() []string { return []string{w.a.DecisionLog, w.b.DecisionLog, w.c.DecisionLog} }

// testVerify: each log verifies against the checkpoint key and ends with
// writ's closing checkpoint; a copy of A's log with one line edited fails at
// that line.
func (w *world) testVerify(t *testing.T) {
	out, code := w.writ(append([]string{"report", "-verify", "-key", w.pubKey, "-closed"}, w.logs()...)...)
	if code != 0 || strings.Count(out, "ok: ") != 3 {
		t.Fatalf("writ report -verify: %d\n%s", code, out)
	}
	raw, err := os.ReadFile(w.a.DecisionLog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	edit := -1
	for i, l := range lines {
		if strings.Contains(l, `"direction":"egress"`) && strings.Contains(l, `"allow":false`) {
			edit = i
			break
		}
	}
	if edit < 0 {
		t.Fatal("A's log has no refused egress decision to edit")
	}
	lines[edit] = strings.Replace(lines[edit], `"allow":false`, `"allow":true`, 1)
	tampered := filepath.Join(t.TempDir(), "decisions.log")
	if err := os.WriteFile(tampered, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = w.writ("report", "-verify", "-key", w.pubKey, tampered)
	if want := fmt.Sprintf("FAIL: %s:%d:", tampered, edit+1); code != 1 || !strings.Contains(out, want) {
		t.Fatalf("the edited log: %d %q, want %q", code, out, want)
	}
}

// testStory: writ report, given the three logs, tells the delegation in the
// order it ran, ingress and egress on every hop: alice's request to A (hop
// 1), A's calls to B and B's writ's decisions of them (hop 2), B's calls to
// C and C's writ's (hop 3).
func (w *world) testStory(t *testing.T, chainID string) {
	out, code := w.writ(append([]string{"report", "-text", "-chain", chainID}, w.logs()...)...)
	if code != 0 {
		t.Fatalf("writ report -chain: %d\n%s", code, out)
	}
	t.Logf("writ report -text -chain %s:\n%s", chainID, out)
	head := fmt.Sprintf("delegation %s: initiated by %s, 3 hop(s), 9 decision(s) (9 allowed, 0 denied)", chainID, alice)
	if !strings.HasPrefix(out, head) || !strings.Contains(out, "from "+strings.Join(w.logs(), ", ")) {
		t.Fatalf("the story's heading:\n%s", out)
	}
	step := regexp.MustCompile(`(?m)^ *\d+\. \S+ \+\S+(?: ms)?  hop (\d)  (ingress|egress) +at (\S+)  ALLOW (\S+)\n +(.+)$`)
	var got []string
	for _, m := range step.FindAllStringSubmatch(out, -1) {
		got = append(got, fmt.Sprintf("%s %s %s %s: %s", m[1], m[2], m[3], m[4], m[5]))
	}
	toB := "alice → portal → agent-a → agent-b"
	toC := toB + " → agent-c"
	want := []string{
		"1 ingress agent-a send: alice → portal → agent-a",
		"2 egress agent-a card: " + toB, "2 ingress agent-b card: " + toB,
		"2 egress agent-a send: " + toB, "2 ingress agent-b send: " + toB,
		"3 egress agent-b card: " + toC, "3 ingress agent-c card: " + toC,
		"3 egress agent-b send: " + toC, "3 ingress agent-c send: " + toC,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the story's steps\n got %q\nwant %q\n%s", got, want, out)
	}
}
