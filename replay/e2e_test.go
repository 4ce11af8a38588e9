package replay_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/report"
	"github.com/writ-authz/writ/server"
)

// candidate is a copy of the shipped policies with edit applied to data.json.
func candidate(t testing.TB, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(proxytest.Policies())); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.json")
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(string(raw))
	if edited == string(raw) {
		t.Fatal("the edit changed nothing")
	}
	if err := os.WriteFile(data, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// maxDepth is a candidate with max_delegation_depth n.
func maxDepth(t testing.TB, n string) string {
	return candidate(t, func(s string) string {
		return strings.Replace(s, `"max_delegation_depth": 4`, `"max_delegation_depth": `+n, 1)
	})
}

// logged is a decision line of a log, as the tests read it.
type logged struct {
	Type       string `json:"type"`
	DecisionID string `json:"decision_id"`
	Operation  string `json:"operation"`
	Allow      bool   `json:"allow"`
	Input      struct {
		Caller struct {
			Chain []string `json:"delegation_chain"`
		} `json:"caller"`
	} `json:"input"`
}

// decisionsWhere are the ids of the log's decisions that keep.
func decisionsWhere(t *testing.T, path string, keep func(logged) bool) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logged
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == "decision" && keep(l) {
			ids = append(ids, l.DecisionID)
		}
	}
	return ids
}

func exampleIDs(g report.FlipGroup) []string {
	var ids []string
	for _, e := range g.Examples {
		ids = append(ids, e.DecisionID)
	}
	slices.Sort(ids)
	return ids
}

func replayed(t *testing.T, r server.ReplayRequest) *report.Impact {
	t.Helper()
	im, err := server.Replay(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	return im
}

// group is the one group of gs, failing when there is not exactly one.
func group(t *testing.T, by string, gs []report.FlipGroup) report.FlipGroup {
	t.Helper()
	if len(gs) != 1 {
		t.Fatalf("by %s: %+v, want one group", by, gs)
	}
	return gs[0]
}

// TestReplayDepthChange: a log a real writ wrote (sends at every delegation
// depth from 0 to 4, a get at depth 3), replayed on the shipped policies
// with the max depth lowered to 3: exactly the sends whose chain is at the
// new limit flip allow→deny, under DEPTH_EXCEEDED, for their caller and
// target; with -base the shipped set, the same. Raised to 5, the sends at 4
// flip deny→allow.
func TestReplayDepthChange(t *testing.T) {
	log := proxytest.DepthLog(t, nil)
	atLimit := decisionsWhere(t, log, func(l logged) bool { return l.Operation == "send" && len(l.Input.Caller.Chain) == 3 })
	beyond := decisionsWhere(t, log, func(l logged) bool { return l.Operation == "send" && len(l.Input.Caller.Chain) == 4 })
	all := decisionsWhere(t, log, func(logged) bool { return true })
	if len(atLimit) != 2 || len(beyond) != 2 || len(all) != 11 {
		t.Fatalf("the log: %d decisions, %d sends at depth 3, %d at 4", len(all), len(atLimit), len(beyond))
	}
	slices.Sort(atLimit)
	slices.Sort(beyond)
	lowered := maxDepth(t, "3")
	for name, base := range map[string][]string{"logged decisions": nil, "base set": {proxytest.Policies()}} {
		im := replayed(t, server.ReplayRequest{Logs: []string{log}, Policies: []string{lowered}, Base: base})
		if im.Replayed != 11 || im.Decisions != 11 || im.Skips() != 0 || im.Errors != 0 {
			t.Fatalf("%s: replayed %d of %d, skipped %v, errors %d (%s)", name, im.Replayed, im.Decisions, im.Skipped, im.Errors, im.FirstError)
		}
		f := im.AllowToDeny
		if f.Count != 2 || im.DenyToAllow.Count != 0 || im.Unexpected != 2 || im.Unchanged != 9 {
			t.Fatalf("%s: %d allow→deny, %d deny→allow, %d unexpected, %d unchanged", name, f.Count, im.DenyToAllow.Count, im.Unexpected, im.Unchanged)
		}
		code := group(t, "code", f.ByCode)
		if code.Name != "DEPTH_EXCEEDED" || code.Count != 2 || !slices.Equal(exampleIDs(code), atLimit) {
			t.Errorf("%s: by code %+v, want DEPTH_EXCEEDED for %v", name, code, atLimit)
		}
		if c := group(t, "caller", f.ByCaller); c.Name != "payments-investigator" || c.Count != 2 {
			t.Errorf("%s: by caller %+v", name, c)
		}
		if g := group(t, "target", f.ByTarget); g.Name != "sanctions-screening-agent" || g.Count != 2 || !slices.Equal(exampleIDs(g), atLimit) {
			t.Errorf("%s: by target %+v", name, g)
		}
		if !regexp.MustCompile(`^decisions\.jsonl:\d+$`).MatchString(filepath.Base(code.Examples[0].Where)) {
			t.Errorf("%s: example at %q", name, code.Examples[0].Where)
		}
	}
	im := replayed(t, server.ReplayRequest{Logs: []string{log}, Policies: []string{maxDepth(t, "5")}})
	if f := im.DenyToAllow; f.Count != 2 || im.AllowToDeny.Count != 0 || group(t, "code", f.ByCode).Name != "DEPTH_EXCEEDED" ||
		!slices.Equal(exampleIDs(f.ByCode[0]), beyond) {
		t.Errorf("raised to 5: %+v, allow→deny %d", f, im.AllowToDeny.Count)
	}
}

// TestReplayUnchanged: the set that made the decisions, replayed on them,
// flips nothing (from another directory: the same content), in either
// format of the log.
func TestReplayUnchanged(t *testing.T) {
	for _, format := range []string{"writ", "opa"} {
		log := proxytest.DepthLog(t, func(c *config.Config) { c.DecisionLog.Format = format })
		same := candidate(t, func(s string) string { return s + "\n" })
		im := replayed(t, server.ReplayRequest{Logs: []string{log}, Policies: []string{same}})
		if im.Replayed != 11 || im.AllowToDeny.Count+im.DenyToAllow.Count+im.Recoded != 0 || im.Unchanged != 11 || im.Unexpected != 0 {
			t.Errorf("%s: replayed %d, flips %d/%d, recoded %d, unchanged %d", format, im.Replayed, im.AllowToDeny.Count,
				im.DenyToAllow.Count, im.Recoded, im.Unchanged)
		}
		if format == "opa" {
			im := replayed(t, server.ReplayRequest{Logs: []string{log}, Policies: []string{maxDepth(t, "3")}})
			if f := im.AllowToDeny; f.Count != 2 || group(t, "caller", f.ByCaller).Name != "payments-investigator" ||
				group(t, "target", f.ByTarget).Name != "sanctions-screening-agent" || f.ByCode[0].Examples[0].DecisionID == "" {
				t.Errorf("opa: lowered to 3: %+v", f)
			}
		}
	}
}

// TestReplayBrokenPolicy: a proposed (or base) set that does not compile is
// refused with its file and line, before any line is replayed.
func TestReplayBrokenPolicy(t *testing.T) {
	log := proxytest.DepthLog(t, nil)
	broken := maxDepth(t, "3")
	depth := filepath.Join(broken, "depth.rego")
	raw, _ := os.ReadFile(depth)
	if err := os.WriteFile(depth, []byte(strings.Replace(string(raw), "within_depth if {", "within_depth if {{", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []server.ReplayRequest{{Policies: []string{broken}}, {Policies: []string{proxytest.Policies()}, Base: []string{broken}}} {
		r.Logs = []string{log}
		im, err := server.Replay(t.Context(), r)
		if !errors.Is(err, server.ErrReplay) || !regexp.MustCompile(`depth\.rego:\d+`).MatchString(err.Error()) || im != nil {
			t.Errorf("%v, want the refusal with depth.rego:line", err)
		}
	}
}

// TestReplaySkips: lines a replay cannot decide again — an input of another
// version, not JSON, a decision logged without its input — are counted
// under their reason with their places, never guessed; the rest replay.
func TestReplaySkips(t *testing.T) {
	log := proxytest.DepthLog(t, nil)
	raw, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	first := slices.IndexFunc(lines, func(s string) bool { return strings.Contains(s, `"type":"decision"`) })
	future := strings.Replace(lines[first], `"input_version":"writ/v1"`, `"input_version":"writ/v9"`, 1)
	noInput := regexp.MustCompile(`,"input_version".*,"seq"`).ReplaceAllString(lines[first], `,"seq"`)
	badDoc := strings.Replace(lines[first], `"input":{"version":"writ/v1"`, `"input":{"version":"writ/v2"`, 1)
	lines = append(lines, future, "{torn line", noInput, badDoc, "")
	edited := filepath.Join(t.TempDir(), "edited.jsonl")
	if err := os.WriteFile(edited, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	im := replayed(t, server.ReplayRequest{Logs: []string{edited}, Policies: []string{proxytest.Policies()}})
	n := len(lines) - 1 // the last is empty
	want := []report.Skip{
		{Why: `input version "writ/v9", not writ/v1`, Count: 1, First: []string{edited + ":" + strconv.Itoa(n-3)}},
		{Why: "not JSON", Count: 1, First: []string{edited + ":" + strconv.Itoa(n-2)}},
		{Why: "no input (decision_log.include_input was off)", Count: 1, First: []string{edited + ":" + strconv.Itoa(n-1)}},
		{Why: "an input that is not a writ/v1 document", Count: 1, First: []string{edited + ":" + strconv.Itoa(n)}},
	}
	if !slicesEqual(im.Skipped, want) {
		t.Errorf("skipped\n%+v\nwant\n%+v", im.Skipped, want)
	}
	if im.Replayed != 11 || im.Decisions != 14 || im.AllowToDeny.Count+im.DenyToAllow.Count != 0 {
		t.Errorf("replayed %d of %d, %d flips", im.Replayed, im.Decisions, im.AllowToDeny.Count+im.DenyToAllow.Count)
	}
}

func slicesEqual(a, b []report.Skip) bool {
	return slices.EqualFunc(a, b, func(x, y report.Skip) bool {
		return x.Why == y.Why && x.Count == y.Count && slices.Equal(x.First, y.First)
	})
}

// TestReplayMasked: a log whose lines mask the chain says so on every line;
// a replay of a set that reads the chain says it could not see it (and,
// seeing no chain, finds no flip at the new limit): it reports, never
// guesses what was masked.
func TestReplayMasked(t *testing.T) {
	log := proxytest.DepthLog(t, func(c *config.Config) {
		c.DecisionLog.Mask = []string{"input.caller.delegation_chain", "input.caller.claims.act"}
	})
	raw, _ := os.ReadFile(log)
	if strings.Contains(string(raw), `"delegation_chain"`) {
		t.Fatal("the chain is on a line although masked")
	}
	if n := strings.Count(string(raw), `"input_masked":["input.caller.delegation_chain","input.caller.claims.act"]`); n != 11 {
		t.Fatalf("%d lines say what was masked, want 11", n)
	}
	im := replayed(t, server.ReplayRequest{Logs: []string{log}, Policies: []string{maxDepth(t, "3")}})
	if !slices.ContainsFunc(im.Notes, func(n string) bool {
		return strings.Contains(n, "the proposed set reads input.caller.delegation_chain, which 11 logged inputs masked")
	}) {
		t.Errorf("notes %q", im.Notes)
	}
	if slices.ContainsFunc(im.Notes, func(n string) bool { return strings.Contains(n, "claims.act") }) {
		t.Errorf("a note on a member the set does not read: %q", im.Notes)
	}
}

// TestReplayExpect: flips an expectation covers are expected (CI passes);
// the others are not; an expectation no flip matched is said.
func TestReplayExpect(t *testing.T) {
	log := proxytest.DepthLog(t, nil)
	lowered := maxDepth(t, "3")
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		expect     string
		unexpected int
		unmet      []string
	}{
		"covered":      {"- flip: allow_to_deny\n  code: DEPTH_EXCEEDED\n  target: sanctions-*\n", 0, nil},
		"any":          {"- flip: any\n  caller: payments-investigator\n", 0, nil},
		"other target": {"- flip: allow_to_deny\n  target: travel\n", 2, []string{"{flip: allow_to_deny, target: travel} (line 1)"}},
		"other way":    {"- flip: deny_to_allow\n  code: DEPTH_EXCEEDED\n", 2, []string{"{flip: deny_to_allow, code: DEPTH_EXCEEDED} (line 1)"}},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(path, []byte(tc.expect), 0o600); err != nil {
			t.Fatal(err)
		}
		im := replayed(t, server.ReplayRequest{Logs: []string{log}, Policies: []string{lowered}, Expect: path})
		if im.Unexpected != tc.unexpected || im.AllowToDeny.Unexpected != tc.unexpected || !slices.Equal(im.Unmet, tc.unmet) || !im.Expected {
			t.Errorf("%s: %d unexpected, unmet %q", name, im.Unexpected, im.Unmet)
		}
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("- flip: allow_to_deny\n- flip: sideways\n"), 0o600)
	if _, err := server.Replay(t.Context(), server.ReplayRequest{Logs: []string{log}, Policies: []string{lowered}, Expect: bad}); !errors.Is(err, server.ErrReplay) ||
		!strings.Contains(err.Error(), `line 2: flip must be allow_to_deny, deny_to_allow or any, not "sideways"`) {
		t.Errorf("bad expectations: %v", err)
	}
	os.WriteFile(bad, []byte("- flip: any\n  targets: x\n"), 0o600)
	if _, err := server.Replay(t.Context(), server.ReplayRequest{Logs: []string{log}, Policies: []string{lowered}, Expect: bad}); err == nil ||
		!strings.Contains(err.Error(), "targets") {
		t.Errorf("unknown key: %v", err)
	}
}
