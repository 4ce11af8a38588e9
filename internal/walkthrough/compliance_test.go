package walkthrough

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/docrun"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

// TestComplianceWorkflow runs docs/compliance-workflow.md exactly as printed
// (its blocks extracted from the page), with the built writ on PATH, in a
// directory holding the checkout's policies and example requests, on free
// ports: traffic through a writ that logs its inputs, the depth change
// edited, tested, evaluated and replayed against the log, then the same
// traffic with the change in shadow (the same answers, the disagreements
// counted and logged) and the promotion by reload. Every printed output
// block must be what the command before it printed.
func TestComplianceWorkflow(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "grep", "sed", "seq", "tail"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the page's commands need %s", tool)
		}
	}
	root, err := writproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "compliance-workflow.md")
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "policies"), os.DirFS(filepath.Join(root, "policies"))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "adapters", "examples"), os.DirFS(filepath.Join(root, "adapters", "examples"))); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(writproc.Binary(t), filepath.Join(bin, "writ")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"), "WRIT_DEV_DIR=",
		"WRIT="+writproc.FreeAddr(t), "ADMIN="+writproc.FreeAddr(t))
	runner := docrun.Runner{Dir: dir, Env: env, Ready: serving}
	var out strings.Builder
	// Each part in a subtest of its own: its writ stops when it ends, as
	// the page's reader stops it before starting the next.
	for _, section := range []string{"compliance", "compliance-shadow"} {
		t.Run(section, func(t *testing.T) {
			out.WriteString(runner.Run(t, docrun.Section(t, page, section)))
		})
	}
	if t.Failed() {
		return
	}
	printed := out.String()
	for _, want := range printedOutputs(t, page) {
		if !strings.Contains(printed, want) {
			t.Errorf("the page prints\n%s\nbut its commands printed\n%s", want, printed)
		}
	}
	for _, want := range []string{
		"allow → deny: 2", "DEPTH_EXCEEDED", "payments-investigator", "case-router", "sanctions-screening-agent",
		"deny → allow: 0",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("the replay did not print %q:\n%s", want, printed)
		}
	}
}

// printedOutputs are the page's output blocks: the fenced blocks without a
// language, what the page says the block before printed.
func printedOutputs(t *testing.T, page string) []string {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var block *strings.Builder
	inFence := false
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "```") {
			if inFence {
				if block != nil {
					out = append(out, block.String())
				}
				inFence, block = false, nil
				continue
			}
			inFence = true
			if strings.TrimSpace(line) == "```" {
				block = &strings.Builder{}
			}
			continue
		}
		if block != nil {
			block.WriteString(line)
		}
	}
	if len(out) < 5 {
		t.Fatalf("%s has %d output blocks", page, len(out))
	}
	return out
}

// serving waits until the writ a background block started serves.
func serving(t testing.TB, b docrun.Block, log *syncbuf.Buffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(log.String(), `"msg":"writ is serving"`) {
		if time.Now().After(deadline) {
			t.Fatalf("%q did not start within 60s:\n%s", strings.TrimSpace(b.Text), log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
