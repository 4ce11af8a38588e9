package demo

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/report"
	"github.com/writ-authz/writ/server"
)

// loggedDecision is what the replay test reads of a demo decision line,
// from the line itself (not from any policy).
type loggedDecision struct {
	ID        string `json:"decision_id"`
	Type      string `json:"type"`
	Operation string `json:"operation"`
	Allow     bool   `json:"allow"`
	Denials   []struct {
		Code string `json:"code"`
	} `json:"denials"`
	Input *struct {
		Caller struct {
			Chain []string `json:"delegation_chain"`
		} `json:"caller"`
	} `json:"input"`
}

// replayDemoLog replays the demo's own decision log (written with
// decision_log.include_input, as writ demo writes it) against the demo's
// policies (played: a copy of the demo's directory) with the max depth
// changed, and wants exactly the decisions whose logged chain is at the
// changed limit to flip, which it finds from the log alone: raised from 4
// to 5, the denial of the four-hop chain (DEPTH_EXCEEDED alone) becomes an
// allow; lowered to 1, every allowed send or stream with a chain flips to
// a deny; unchanged, nothing flips.
func replayDemoLog(t *testing.T, log, played string) {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	var raise, lower []string
	var decided int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var d loggedDecision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("a line of the demo's log: %v", err)
		}
		if d.Type != "decision" {
			continue
		}
		decided++
		if d.Input == nil {
			t.Fatalf("decision %s has no input: the demo's log is not a replay corpus", d.ID)
		}
		hops := len(d.Input.Caller.Chain)
		if !d.Allow && hops == 4 && len(d.Denials) == 1 && d.Denials[0].Code == "DEPTH_EXCEEDED" {
			raise = append(raise, d.ID)
		}
		if d.Allow && hops >= 1 && (d.Operation == "send" || d.Operation == "stream") {
			lower = append(lower, d.ID)
		}
	}
	f.Close()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the demo log: %d decisions, %d to flip with max depth 5, %d with max depth 1", decided, len(raise), len(lower))
	if len(raise) != 1 || len(lower) < 5 {
		t.Fatalf("the demo's log has %d decisions, %d at four hops denied for depth alone and %d allowed sends with a chain: not the scenario's traffic",
			decided, len(raise), len(lower))
	}
	raw, err := os.ReadFile(filepath.Join(played, "writ.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	policies := filepath.Join(played, "policies")
	depth := func(n string) string {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(policies)); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, "data.json")
		b, err := os.ReadFile(data)
		if err != nil || !strings.Contains(string(b), `"max_delegation_depth": 4`) {
			t.Fatalf("the demo's data.json: %v", err)
		}
		if err := os.WriteFile(data, []byte(strings.Replace(string(b), `"max_delegation_depth": 4`, `"max_delegation_depth": `+n, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, c := range []struct {
		name, policies string
		allowToDeny    []string
		denyToAllow    []string
	}{
		{"unchanged", policies, nil, nil},
		{"max depth 5", depth("5"), nil, raise},
		{"max depth 1", depth("1"), lower, nil},
	} {
		im, err := server.Replay(t.Context(), server.ReplayRequest{Logs: []string{log}, Policies: []string{c.policies}, Config: cfg})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if im.Replayed != decided {
			t.Errorf("%s: replayed %d of the log's %d decisions", c.name, im.Replayed, decided)
		}
		for _, w := range []struct {
			way  string
			got  int
			ids  []string
			want []string
			code string
		}{
			{"allow → deny", im.AllowToDeny.Count, flipIDs(im.AllowToDeny.ByCode), c.allowToDeny, "DEPTH_EXCEEDED"},
			{"deny → allow", im.DenyToAllow.Count, flipIDs(im.DenyToAllow.ByCode), c.denyToAllow, "DEPTH_EXCEEDED"},
		} {
			if w.got != len(w.want) {
				t.Errorf("%s: %s %d, want %d (%v)", c.name, w.way, w.got, len(w.want), w.want)
			}
			for _, id := range w.ids { // the examples: each one the log says flips
				if !slices.Contains(w.want, id) {
					t.Errorf("%s: %s flipped decision %s, which the log's chain does not put at the limit", c.name, w.way, id)
				}
			}
		}
		if len(c.allowToDeny) > 0 && (len(im.AllowToDeny.ByCode) != 1 || im.AllowToDeny.ByCode[0].Name != "DEPTH_EXCEEDED") {
			t.Errorf("%s: allow → deny by code %+v, want DEPTH_EXCEEDED alone", c.name, im.AllowToDeny.ByCode)
		}
	}
}

// flipIDs are the decision ids of a direction's examples.
func flipIDs(groups []report.FlipGroup) []string {
	var ids []string
	for _, g := range groups {
		for _, e := range g.Examples {
			ids = append(ids, e.DecisionID)
		}
	}
	sort.Strings(ids)
	return ids
}
