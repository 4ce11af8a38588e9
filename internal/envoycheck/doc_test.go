package envoycheck_test

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

// grpcurlVersion is the grpcurl the page's block is run with when GRPCURL
// (make test's, in .tools) names none.
const grpcurlVersion = "v1.9.4"

// grpcurl is the grpcurl binary: $GRPCURL, or the repository's .tools one,
// built there at grpcurlVersion when missing.
func grpcurl(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("GRPCURL"); p != "" {
		return p
	}
	tools := filepath.Join(root, ".tools")
	bin := filepath.Join(tools, "grpcurl")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+grpcurlVersion)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOBIN="+tools, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing grpcurl: %v\n%s", err, out)
	}
	return bin
}

// TestEnvoyWithoutEnvoyAsPrinted runs docs/envoy.md's "Envoy mode without
// Envoy" as printed, with the built writ and grpcurl on PATH, from a
// directory of its own: the development key, the config, writ serve with its
// Envoy listeners, writ envoy-check in both modes (let through), without a
// token (answered by writ, 401), grpcurl's CheckRequest and curl to the HTTP
// ext_authz listener (both let through).
func TestEnvoyWithoutEnvoyAsPrinted(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the page's commands need %s", tool)
		}
	}
	root, err := writproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks := docrun.Section(t, filepath.Join(root, "docs", "envoy.md"), "envoy-without-envoy")
	dir := t.TempDir()
	bin := t.TempDir()
	for name, target := range map[string]string{"writ": writproc.Binary(t), "grpcurl": grpcurl(t, root)} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	for _, name := range []string{"WRIT_LISTEN", "WRIT_ADMIN", "ENVOY_EXT_PROC", "ENVOY_GRPC", "ENVOY_HTTP"} {
		env = append(env, name+"="+writproc.FreeAddr(t))
	}
	out := docrun.Runner{Dir: dir, Env: env, Ready: func(t testing.TB, b docrun.Block, log *syncbuf.Buffer) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(log.String(), `"msg":"writ is serving"`) {
			if time.Now().After(deadline) {
				t.Fatalf("%q did not start within 60s:\n%s", strings.TrimSpace(b.Text), log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}}.Run(t, blocks)
	for _, want := range []string{
		"ext_proc: allowed: Envoy sends the request on to the agent\n",
		"ext_authz: allowed: Envoy sends the request on to the agent\n",
		"  sets writ-caller: ",
		"ext_proc: answered by writ: Envoy answers 401 Unauthorized in the agent's place\n",
		"UNAUTHENTICATED", "exit 1\n",
		`"okResponse": {`,
		"HTTP/1.1 200 OK",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the page's commands did not print %q:\n%s", want, out)
		}
	}
}
