package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/admin"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/report"
	"github.com/writ-authz/writ/server"
	"github.com/writ-authz/writ/task"
)

// shippedWith is a copy of the shipped policies with max_delegation_depth
// set to depth and the extra files added (name → content).
func shippedWith(t *testing.T, depth int, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(proxytest.Policies())); err != nil {
		t.Fatal(err)
	}
	setDepth(t, dir, depth)
	for name, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// setDepth sets max_delegation_depth in dir's data.json.
func setDepth(t *testing.T, dir string, depth int) {
	t.Helper()
	path := filepath.Join(dir, "data.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]map[string]map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	data["writ"]["config"]["max_delegation_depth"] = depth
	out, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// answer is what a caller got back, but for the Date header.
type answer struct {
	status int
	header http.Header
	body   string
}

// traffic sends the scenario through h: from a wholesale caller, two sends
// at every delegation depth 0 to 4 and a GetTask at depth 3; from a retail
// caller (a tenant the agent serves, of a lower classification) a send at
// depth 3. It returns the answers in order.
func traffic(t *testing.T, h *proxytest.Harness) []answer {
	t.Helper()
	var out []answer
	send := func(c proxytest.Caller, method string, params any) {
		raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		if err != nil {
			t.Fatal(err)
		}
		resp, body := h.Do("POST", "/", h.Token(c), raw, map[string]string{"A2A-Version": "1.0"})
		// The decision id is random, with a shadow or without: it is the
		// one part of an answer that differs between any two runs.
		hdr := resp.Header.Clone()
		hdr.Del("Date")
		id := hdr.Get("Writ-Decision-Id")
		if id == "" {
			t.Fatalf("an answer without a decision id: %d %s", resp.StatusCode, body)
		}
		hdr.Set("Writ-Decision-Id", "ID")
		out = append(out, answer{resp.StatusCode, hdr, strings.ReplaceAll(string(body), id, "ID")})
	}
	for depth := range 5 {
		c := proxytest.Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale", Class: "restricted", Scopes: "delegate"}
		for i := range depth {
			c.Chain = append(c.Chain, fmt.Sprintf("hop-%d", i))
		}
		send(c, "SendMessage", proxytest.SendParams)
		send(c, "SendMessage", proxytest.SendParams)
		if depth == 3 {
			send(c, "GetTask", map[string]any{"id": "t-1"})
		}
	}
	send(proxytest.Caller{Agent: "kyc-bot", User: "u-7", Tenant: "elsewhere", Class: "internal", Scopes: "delegate",
		Chain: []string{"a", "b", "c"}}, "SendMessage", proxytest.SendParams)
	return out
}

// waitEvaluated waits until the shadow of h has evaluated n decisions.
func waitEvaluated(t *testing.T, h *proxytest.Harness, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := h.Server.Shadow().Counts()
		if c.Agree+c.Disagree+c.Error+c.Dropped >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow evaluated %+v of %d decisions", c, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readLog decodes every line of the decision log at path.
func readLog(t *testing.T, path string) []decisionlog.Line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []decisionlog.Line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l decisionlog.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// get is the body of an admin API GET.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// sameAnswers fails unless got answers byte for byte as want.
func sameAnswers(t *testing.T, want, got []answer) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%d answers, want %d", len(got), len(want))
	}
	for i := range want {
		if want[i].status != got[i].status || want[i].body != got[i].body || !equalHeaders(want[i].header, got[i].header) {
			t.Errorf("answer %d with the shadow:\n%d %v %s\nwithout:\n%d %v %s", i,
				got[i].status, got[i].header, got[i].body, want[i].status, want[i].header, want[i].body)
		}
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestShadowAnswersAsLive: a sidecar with a stricter shadow set (max depth
// 2) answers byte for byte as one without it, while the shadow's
// disagreement lines and counters name exactly the decisions the shadow
// would have refused: the live allows of sends 2 and 3 deep
// (allow_to_deny), and the send 3 deep the live set denied for another
// code alone (codes: the shadow adds DEPTH_EXCEEDED).
//
// Threat: a draft policy run in shadow leaks into what callers get (its
// denials served, its latency paid), or its disagreements are miscounted,
// so a change is promoted on a false picture of its impact. Defence: the
// live decision alone answers; the shadow decides the same input after it,
// and each disagreement is one shadow_disagreement line naming the live
// decision, and one count by code and direction.
func TestShadowAnswersAsLive(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	agents := []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}
	plain := proxytest.New(t, agents, nil)
	want := traffic(t, plain)

	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	shadowDir := shippedWith(t, 2, nil)
	h := proxytest.New(t, agents, func(c *config.Config) {
		c.PoliciesShadow = []string{shadowDir}
		c.DecisionLog.Output = logPath
	})
	got := traffic(t, h)
	sameAnswers(t, want, got)
	waitEvaluated(t, h, uint64(len(got)))
	c := h.Server.Shadow().Counts()
	if c.Error+c.Dropped != 0 || c.Agree+c.Disagree != uint64(len(got)) {
		t.Fatalf("shadow counts %+v for %d decisions", c, len(got))
	}

	metrics := get(t, h.Server.AdminURL()+"/metrics")
	for _, line := range []string{
		`writ_shadow_disagreements_total{code="DEPTH_EXCEEDED",direction="allow_to_deny"} 4`,
		`writ_shadow_disagreements_total{code="DEPTH_EXCEEDED",direction="codes"} 1`,
		fmt.Sprintf(`writ_shadow_evaluations_total{result="agree"} %d`, len(got)-5),
		`writ_shadow_evaluations_total{result="disagree"} 5`,
		`writ_shadow_evaluations_total{result="error"} 0`,
		`writ_shadow_evaluations_total{result="dropped"} 0`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	if n := strings.Count(metrics, "writ_shadow_disagreements_total{"); n != 2 {
		t.Errorf("%d disagreement series, want 2:\n%s", n, metrics)
	}
	var st admin.PolicyStatus
	if err := json.Unmarshal([]byte(get(t, h.Server.AdminURL()+"/v1/policy")), &st); err != nil {
		t.Fatal(err)
	}
	shadowRev := h.Server.Shadow().Policy().Revision
	if st.Shadow == nil || st.Shadow.Revision != shadowRev || shadowRev == st.Revision ||
		st.Shadow.Evaluations.Disagree != 5 || st.Shadow.DisagreementRate != 5/float64(len(got)) {
		t.Fatalf("GET /v1/policy shadow: %+v (live %s)", st.Shadow, st.Revision)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var wantIDs, gotIDs []string
	decisions := map[string]decisionlog.Line{}
	lines := readLog(t, logPath)
	for _, l := range lines {
		if l.Type == decisionlog.TypeDecision {
			decisions[l.DecisionID] = l
		}
	}
	// A disagreement may be logged before its decision: the shadow runs
	// as soon as the live decision is made, the decision line once the
	// answer is.
	for _, l := range lines {
		switch l.Type {
		case decisionlog.TypeDecision:
			// The oracle: the sends 2 deep or more that max depth 4 did not
			// already refuse for their depth.
			if l.Operation == "send" && len(l.Caller.Chain) >= 2 && !slices.ContainsFunc(l.Denials,
				func(d task.Denial) bool { return d.Code == "DEPTH_EXCEEDED" }) {
				wantIDs = append(wantIDs, l.DecisionID)
			}
		case decisionlog.TypeShadowDisagreement:
			gotIDs = append(gotIDs, l.DecisionID)
			d := decisions[l.DecisionID]
			var liveCodes []string
			for _, x := range d.Denials {
				liveCodes = append(liveCodes, x.Code)
			}
			dir, shadowCodes := "allow_to_deny", []string{"DEPTH_EXCEEDED"}
			if !d.Allow {
				dir, shadowCodes = "codes", slices.Concat(liveCodes, []string{"DEPTH_EXCEEDED"})
				slices.Sort(shadowCodes)
			}
			if l.Route != "sanctions-screening-agent" || l.Operation != "send" || l.Direction != dir ||
				l.Code != "DEPTH_EXCEEDED" || l.Live == nil || l.Shadow == nil || l.Live.Allow != d.Allow || l.Shadow.Allow ||
				!slices.Equal(l.Live.Codes, liveCodes) || !slices.Equal(l.Shadow.Codes, shadowCodes) ||
				l.Live.Revision != d.PolicyRevision || l.Shadow.Revision != shadowRev {
				t.Errorf("shadow line %+v (live %+v, shadow %+v; decision %+v)", l, l.Live, l.Shadow, d)
			}
		}
	}
	slices.Sort(wantIDs)
	slices.Sort(gotIDs)
	if len(wantIDs) != 5 || !slices.Equal(wantIDs, gotIDs) {
		t.Fatalf("shadow lines for %v, want %v", gotIDs, wantIDs)
	}
	shadowReport(t, logPath, shadowRev, gotIDs)
}

// shadowReport checks writ report's view of the log's shadow lines: the
// five disagreements by direction and code, the shadow's revision, each
// example a decision the log has a shadow line for, and the page's section.
func shadowReport(t *testing.T, logPath, shadowRev string, ids []string) {
	t.Helper()
	sum, err := report.ReadFiles([]string{logPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sh := sum.Shadow
	if sh.Disagreements != 5 || sh.AllowToDeny != 4 || sh.Recoded != 1 || sh.DenyToAllow != 0 ||
		!slices.Equal(sh.Revisions, []string{shadowRev}) || len(sh.Rows) != 2 ||
		sh.Rows[0].Direction != "allow_to_deny" || sh.Rows[0].Count != 4 || sh.Rows[0].Code != "DEPTH_EXCEEDED" ||
		sh.Rows[1].Direction != "codes" || sh.Rows[1].Count != 1 {
		t.Fatalf("the report's shadow: %+v", sh)
	}
	for _, r := range sh.Rows {
		for _, e := range r.Examples {
			if !slices.Contains(ids, e.DecisionID) {
				t.Errorf("example %s is no shadow line's decision", e)
			}
		}
	}
	if sum.Unknown[decisionlog.TypeShadowDisagreement] != 0 {
		t.Errorf("shadow lines counted as unknown: %v", sum.Unknown)
	}
	var page strings.Builder
	if err := report.Render(&page, sum, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="shadow-disagreements">5<`, `id="shadow-allow-to-deny">4<`, `id="shadow-revisions">` + shadowRev + `<`,
		"live allowed, shadow would deny"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// TestShadowErrorNeverChangesTheAnswer: a shadow set whose evaluation fails
// on delegated callers (two complete rules conflict) is counted as error,
// and every answer is the one writ gives without the shadow.
//
// Threat: a shadow set that errors at run time fails requests closed,
// turning a draft under review into an outage. Defence: a shadow error is
// the shadow's alone: logged and counted (writ_shadow_evaluations_total
// {result="error"}), the live decision answers.
func TestShadowErrorNeverChangesTheAnswer(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	agents := []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}
	plain := proxytest.New(t, agents, nil)
	want := traffic(t, plain)
	// The known requests have no delegation chain: the set loads, and
	// fails on every delegated request.
	shadowDir := shippedWith(t, 4, map[string]string{"conflict.rego": "package writ.authz\n\n" +
		"chain_length := 99 if count(input.caller.delegation_chain) > 0\n"})
	h := proxytest.New(t, agents, func(c *config.Config) { c.PoliciesShadow = []string{shadowDir} })
	got := traffic(t, h)
	sameAnswers(t, want, got)
	waitEvaluated(t, h, uint64(len(got)))
	// Every delegated send; the two sends at depth 0 and the GetTask (the
	// depth rule is not evaluated on a read) agree.
	if c := h.Server.Shadow().Counts(); c.Error != uint64(len(got)-3) || c.Agree != 3 || c.Disagree+c.Dropped != 0 {
		t.Fatalf("shadow counts %+v for %d decisions", c, len(got))
	}
	if m := get(t, h.Server.AdminURL()+"/metrics"); !strings.Contains(m, fmt.Sprintf("writ_shadow_evaluations_total{result=\"error\"} %d\n", len(got)-3)) {
		t.Errorf("metrics:\n%s", m)
	}
}

// failingTest is a Rego test that fails unless max depth is 2.
const failingTest = "package writ.authz_test\n\nimport rego.v1\n\n" +
	"test_shadow_depth_is_two if data.writ.config.max_delegation_depth == 2\n"

// TestShadowGate: a shadow set that fails its own Rego tests refuses the
// start, naming policies_shadow and the test; once running, a reload to
// such a set is refused and the last good shadow keeps running, while the
// live set still reloads.
//
// Threat: a shadow set nobody tested is run (and its disagreements read as
// the impact of a change), or a broken edit of it stops the shadow or the
// live reload. Defence: the shadow set passes the live set's gate (its
// Rego tests, the configuration's known requests) at start and at every
// reload; a refused reload keeps the last good shadow.
func TestShadowGate(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	cfgFor := func(shadow string) *config.Config {
		idp := filepath.Join(proxytest.Root(), "testdata", "identity", "bench_jwks.json")
		cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\ndecision_log: {output: 'off'}\npush: {disabled: true}\n" +
			"policies: [" + proxytest.Policies() + "]\npolicies_shadow: [" + shadow + "]\n" +
			"identity:\n  jwt:\n    - issuer: https://idp.test\n      audiences: [writ]\n      jwks_file: " + idp + "\n" +
			"agents:\n  - {name: placeholder, upstream: 'http://127.0.0.1:1', max_data_classification: public, security_schemes: [oauth2]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Agents = []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}
		cfg.Agents[0].Route, cfg.Agents[0].JSONRPCPath = "/", "/"
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ctx := t.Context()
	bad := shippedWith(t, 4, map[string]string{"shadow_test.rego": failingTest})
	if s, err := server.New(ctx, cfgFor(bad), server.WithLogger(slog.New(slog.DiscardHandler))); err == nil {
		s.Shutdown(ctx) //nolint:errcheck // the test fails anyway
		t.Fatal("a shadow set failing its tests started")
	} else if !strings.Contains(err.Error(), "policies_shadow") || !strings.Contains(err.Error(), "test_shadow_depth_is_two") {
		t.Fatalf("start refused with %v", err)
	}

	// writ validate refuses it as the start does.
	v := server.Validate(ctx, cfgFor(bad), server.ValidateOptions{Offline: true})
	var refused bool
	for _, f := range v.Findings {
		refused = refused || (f.Kind == "error" && f.Key == "policies_shadow" && strings.Contains(f.Msg, "test_shadow_depth_is_two"))
	}
	if !refused {
		t.Errorf("writ validate of a shadow failing its tests: %q %+v", v.Summary, v.Findings)
	}

	good := shippedWith(t, 2, map[string]string{"shadow_test.rego": failingTest})
	if v := server.Validate(ctx, cfgFor(good), server.ValidateOptions{Offline: true}); !strings.Contains(v.Summary, "; shadow: "+good+" (revision ") {
		t.Errorf("writ validate of a good shadow: %q %+v", v.Summary, v.Findings)
	}
	s, err := server.New(ctx, cfgFor(good), server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background()) //nolint:errcheck // checked by the other tests
	rev := s.Shadow().Policy().Revision
	setDepth(t, good, 3) // its own test now fails
	err = s.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), "policies_shadow") || !strings.Contains(err.Error(), "test_shadow_depth_is_two") {
		t.Fatalf("reload: %v", err)
	}
	if got := s.Shadow().Policy().Revision; got != rev {
		t.Fatalf("the shadow's revision moved from %s to %s on a refused reload", rev, got)
	}
	setDepth(t, good, 2)
	if err := s.Reload(ctx); err != nil {
		t.Fatalf("a good reload: %v", err)
	}
}
