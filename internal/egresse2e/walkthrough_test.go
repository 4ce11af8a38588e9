package egresse2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/docrun"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

// TestEgressWalkthrough runs docs/egress-walkthrough.md exactly as printed
// (its blocks extracted from the page, not copied here), with the built
// writ on PATH and the page's ports moved to free ones: writ sts, three writ
// serve, the three JS agents, one delegation through all of them, the
// refusals, -verify of the logs and of an edited copy, and the story.
func TestEgressWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "openssl", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through's commands need %s", tool)
		}
	}
	js := peers.EnsureNode(t)
	root, err := writproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks := docrun.Section(t, filepath.Join(root, "docs", "egress-walkthrough.md"), "egress-walkthrough")
	dir := t.TempDir()
	// The page runs in a checkout: its agents are testdata/peers/js's.
	if err := os.MkdirAll(filepath.Join(dir, "testdata", "peers"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(js, filepath.Join(dir, "testdata", "peers", "js")); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(writproc.Binary(t), filepath.Join(bin, "writ")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	for _, name := range []string{"STS", "WRIT_A", "WRIT_B", "WRIT_C", "EGRESS_A", "EGRESS_B"} {
		env = append(env, name+"="+writproc.FreeAddr(t))
	}
	for _, name := range []string{"AGENT_A", "AGENT_B", "AGENT_C"} {
		addr := writproc.FreeAddr(t)
		env = append(env, name+"="+addr[strings.LastIndexByte(addr, ':')+1:])
	}
	out := docrun.Runner{Dir: dir, Env: env, Ready: started}.Run(t, blocks)

	for _, want := range []string{
		`"state":"TASK_STATE_COMPLETED"`, "delegated to agent-b: completed " + screened,
		"403 [PERMISSION_DENIED, CYCLE_DETECTED]", "403 [PERMISSION_DENIED, CLASSIFICATION_EXCEEDED]",
		"401\n", `{"error":"invalid_scope","error_description":"requested scope widens the subject token's: payments:write"}`,
		"FAIL: edited.log:",
		"initiated by alice, 3 hop(s), 9 decision(s) (9 allowed, 0 denied)", "from a.log, b.log, c.log",
		"hop 1  ingress at agent-a  ALLOW send\n    alice → portal → agent-a\n",
		"hop 3  ingress at agent-c  ALLOW send\n    alice → portal → agent-a → agent-b → agent-c\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk-through did not print %q:\n%s", want, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^ok: \d+ lines, [1-9]\d* checkpoints?, .*[1-9]\d* signatures? verified`).FindAllString(out, -1)); n != 3 {
		t.Errorf("-verify printed %d ok lines with signed checkpoints, want one per log:\n%s", n, out)
	}
}

// started waits until the process a background block of the walk-through
// started says it serves.
func started(t testing.TB, b docrun.Block, log *syncbuf.Buffer) {
	t.Helper()
	ready := "READY " // the JS agents
	switch {
	case strings.Contains(b.Text, "writ sts"):
		ready = "writ sts is serving"
	case strings.Contains(b.Text, "writ serve"):
		ready = `"msg":"writ is serving"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(log.String(), ready) {
		if time.Now().After(deadline) {
			t.Fatalf("%q did not print %q within 60s:\n%s", strings.TrimSpace(b.Text), ready, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
