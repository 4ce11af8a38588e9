package walkthrough

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/docrun"
	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	writproc.Cleanup()
	os.Exit(code)
}

// TestWalkthrough runs docs/walkthrough.md exactly as printed (its blocks
// extracted from the page, not copied here) against each example agent, in a
// copy of the checkout's examples/ with the built writ on PATH and the
// page's ports moved to free ones, and checks each step's outcome: the agent
// answers the allowed sends (A2A 1.0 and 0.3 for the JS agent, 0.3 for the
// Go one) and writ does not mark them its own; writ refuses the too-deep
// chain, the other tenant and the disallowed callback, each marked
// Writ-Answered-By: writ; another caller's task is answered exactly like a
// missing one; the report counts the walk-through's decisions and names
// every refusal's code and decision id.
func TestWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "grep", "cut", "tee"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through's commands need %s", tool)
		}
	}
	t.Run("js-agent", func(t *testing.T) { t.Parallel(); walk(t, "js-agent") })
	t.Run("go-agent", func(t *testing.T) { t.Parallel(); walk(t, "go-agent") })
}

// step is what one block of the page printed.
type step struct{ name, out string }

func walk(t *testing.T, example string) {
	start := time.Now()
	root, err := writproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "walkthrough.md")
	dir := t.TempDir() // the checkout the page runs in: examples/ only
	copyExample(t, root, dir, example)
	env := baseEnv(t, dir)

	// The page's config is the example's own.
	cfg := docrun.Section(t, page, "walkthrough-config")
	for _, ex := range []string{"js-agent", "go-agent"} {
		if got, want := cfg[0].Text, readFile(t, filepath.Join(root, "examples", ex, "writ.yaml")); got != want {
			t.Errorf("docs/walkthrough.md's writ.yaml is not examples/%s/writ.yaml:\n%s\n--- the file:\n%s", ex, got, want)
		}
	}

	var sends []string
	switch example {
	case "js-agent":
		// The page's npm ci, run once in the checkout (as the other
		// @a2a-js/sdk peers are) and linked into the copy.
		install := docrun.Section(t, page, "walkthrough-js-install")
		if want := "(cd examples/js-agent && npm ci --no-audit --no-fund)\n"; len(install) != 1 || install[0].Text != want {
			t.Fatalf("the page's npm ci is not the one the test runs (%q): %+v", want, install)
		}
		installed := peers.EnsureNodeDir(t, filepath.Join("examples", "js-agent"))
		if err := os.Symlink(filepath.Join(installed, "node_modules"), filepath.Join(dir, "examples", "js-agent", "node_modules")); err != nil {
			t.Fatal(err)
		}
		sends = []string{"walkthrough-send-1-0", "walkthrough-send-0-3"}
	case "go-agent":
		env = append(env, goEnv(t, root, dir)...)
		env = append(env, "EXAMPLE=examples/go-agent")
		sends = []string{"walkthrough-send-0-3"}
	}

	run := func(name string, blocks []docrun.Block) []step {
		var out []step
		for _, b := range blocks {
			out = append(out, step{name, docrun.Runner{Dir: dir, Env: env, Ready: ready(env)}.Run(t, []docrun.Block{b})})
		}
		return out
	}
	agent := "walkthrough-js"
	if example == "go-agent" {
		agent = "walkthrough-go"
	}
	run("agent", docrun.Section(t, page, agent))
	setup := run("setup", docrun.Section(t, page, "walkthrough-setup"))
	if want := "ok: examples/" + example + "/writ.yaml"; !strings.Contains(setup[0].out, want) {
		t.Errorf("writ validate did not print %q:\n%s", want, setup[0].out)
	}
	for _, s := range sends {
		checkAllowed(t, s, run(s, docrun.Section(t, page, s))[0].out)
	}
	steps := run("walkthrough", docrun.Section(t, page, "walkthrough"))
	if len(steps) != 5 {
		t.Fatalf("the walk-through has %d refusal and report steps, want 5 (depth, tenant, callback, another caller's task, report)", len(steps))
	}
	ids := map[string]string{} // code -> the refusal's Writ-Decision-Id
	for i, code := range []string{"DEPTH_EXCEEDED", "TENANT_NOT_PERMITTED", "CALLBACK_NOT_ALLOWED"} {
		ids[code] = checkRefused(t, code, steps[i].out)
	}
	checkForeignLikeMissing(t, steps[3].out)
	checkReport(t, steps[4].out, filepath.Join(dir, "examples", example, "report.html"),
		filepath.Join(dir, "examples", example, "decisions.log"), len(sends), ids)
	t.Logf("the walk-through against examples/%s took %s", example, time.Since(start).Round(time.Millisecond))
}

var decisionID = regexp.MustCompile(`(?mi)^writ-decision-id: ([0-9a-f]+)\r?$`)

func answeredByWrit(out string) bool {
	return regexp.MustCompile(`(?mi)^writ-answered-by: writ\r?$`).MatchString(out)
}

// checkAllowed: the agent's task, completed, said back, and not writ's answer.
func checkAllowed(t *testing.T, name, out string) {
	t.Helper()
	for _, want := range []string{"HTTP/1.1 200 OK", "echo: hello"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s did not print %q:\n%s", name, want, out)
		}
	}
	if !strings.Contains(out, `"TASK_STATE_COMPLETED"`) && !strings.Contains(out, `"state":"completed"`) {
		t.Errorf("%s: the task is not completed:\n%s", name, out)
	}
	if answeredByWrit(out) || !decisionID.MatchString(out) {
		t.Errorf("%s: the agent's answer must carry writ's decision id and not Writ-Answered-By:\n%s", name, out)
	}
}

// checkRefused: writ's 403 with code, marked as writ's; returns its decision id.
func checkRefused(t *testing.T, code, out string) string {
	t.Helper()
	if !strings.Contains(out, "HTTP/1.1 403 Forbidden") || !strings.Contains(out, `"reason":"`+code+`"`) || !answeredByWrit(out) {
		t.Errorf("want writ's 403 %s marked Writ-Answered-By: writ, got:\n%s", code, out)
	}
	m := decisionID.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("the %s refusal has no Writ-Decision-Id:\n%s", code, out)
		return ""
	}
	return m[1]
}

// checkForeignLikeMissing: the other caller's GetTask of the first task and
// of a task that does not exist get the same answer from writ, but for the id.
func checkForeignLikeMissing(t *testing.T, out string) {
	t.Helper()
	answers := strings.Split(strings.TrimSpace(out), "\n\n")
	if len(answers) != 2 {
		t.Fatalf("want two answers, got:\n%s", out)
	}
	task := regexp.MustCompile(`"task ([^"]+) not found"`).FindStringSubmatch(answers[0])
	if task == nil || task[1] == "no-such-task" {
		t.Fatalf("the other caller's GetTask was not answered TaskNotFound for the first task:\n%s", out)
	}
	for _, a := range answers {
		if !answeredByWrit(a) || !strings.Contains(a, `"code":-32001`) || !strings.Contains(a, "HTTP/1.1 200 OK") {
			t.Errorf("want writ's TaskNotFound (-32001), got:\n%s", a)
		}
	}
	if got := strings.ReplaceAll(answers[0], task[1], "no-such-task"); got != answers[1] {
		t.Errorf("another caller's task is answered unlike a missing one:\n%s\n--- missing:\n%s", got, answers[1])
	}
}

// checkReport: the walk-through's decisions counted (the allowed sends; the
// three refusals and both GetTasks denied), every refusal's code on the page
// and its decision id on its line of the log.
func checkReport(t *testing.T, out, html, decisions string, allowed int, ids map[string]string) {
	t.Helper()
	m := regexp.MustCompile(`writ report: (\d+) decisions \((\d+) allowed, (\d+) denied\) from examples/[a-z-]+/decisions\.log written to examples/[a-z-]+/report\.html`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("writ report did not print its summary:\n%s", out)
	}
	if want := strconv.Itoa(allowed+5) + "/" + strconv.Itoa(allowed) + "/5"; m[1]+"/"+m[2]+"/"+m[3] != want {
		t.Errorf("writ report counted %s decisions/allowed/denied, want %s:\n%s", m[1]+"/"+m[2]+"/"+m[3], want, out)
	}
	page := readFile(t, html)
	for _, want := range []string{"DEPTH_EXCEEDED", "TENANT_NOT_PERMITTED", "CALLBACK_NOT_ALLOWED", "NOT_TASK_OWNER"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html does not name %q", want)
		}
	}
	// Each refusal's Writ-Decision-Id is its decision line's, with its code.
	lines := strings.Split(readFile(t, decisions), "\n")
	for code, id := range ids {
		found := false
		for _, l := range lines {
			if strings.Contains(l, `"decision_id":"`+id+`"`) && strings.Contains(l, `"type":"decision"`) {
				found = strings.Contains(l, `"allow":false`) && strings.Contains(l, `"code":"`+code+`"`)
			}
		}
		if !found {
			t.Errorf("the decision log has no denied decision %s with %s", id, code)
		}
	}
}

// ready waits for what a background block started: an example agent's
// listening line, or writ's /readyz (which asks the agent for its card).
func ready(env []string) func(testing.TB, docrun.Block, *syncbuf.Buffer) {
	return func(t testing.TB, b docrun.Block, log *syncbuf.Buffer) {
		t.Helper()
		deadline := time.Now().Add(120 * time.Second) // go run compiles the Go agent
		for {
			if strings.Contains(b.Text, "writ serve") {
				if resp, err := http.Get("http://" + lookup(env, "WRIT_ADMIN") + "/readyz"); err == nil {
					_ = resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return
					}
				}
			} else if strings.Contains(log.String(), "echo-agent listening on") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q not ready after 120s:\n%s", strings.TrimSpace(b.Text), log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func baseEnv(t *testing.T, dir string) []string {
	bin := t.TempDir()
	if err := os.Symlink(writproc.Binary(t), filepath.Join(bin, "writ")); err != nil {
		t.Fatal(err)
	}
	port := writproc.FreeAddr(t)
	return append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"WRIT_LISTEN="+writproc.FreeAddr(t), "WRIT_ADMIN="+writproc.FreeAddr(t),
		"AGENT_PORT="+port[strings.LastIndexByte(port, ':')+1:])
}

// goEnv lets `go run ./examples/go-agent` build in the copy: the module's
// go.mod and go.sum, and this machine's module and build caches (HOME is
// the test's own).
func goEnv(t *testing.T, root, dir string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the Go agent's step needs go on PATH")
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := os.Symlink(filepath.Join(root, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, k := range []string{"GOPATH", "GOMODCACHE", "GOCACHE"} {
		v, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(v)))
	}
	return append(env, "GOTOOLCHAIN=local", "GOFLAGS=-mod=readonly")
}

// copyExample copies examples/rpc.sh and the example's files (not its
// node_modules or what a run of the page left) into dir/examples.
func copyExample(t *testing.T, root, dir, example string) {
	t.Helper()
	files := map[string][]string{
		"js-agent": {"agent.mjs", "package.json", "package-lock.json", "writ.yaml"},
		"go-agent": {"main.go", "writ.yaml"},
	}[example]
	if err := os.MkdirAll(filepath.Join(dir, "examples", example), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"rpc.sh"}, prefix(example+"/", files)...) {
		if err := os.WriteFile(filepath.Join(dir, "examples", f), []byte(readFile(t, filepath.Join(root, "examples", f))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func prefix(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

func lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
