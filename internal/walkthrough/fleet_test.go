package walkthrough

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/docrun"
	"github.com/writ-authz/writ/internal/writproc"
	"github.com/writ-authz/writ/server"
)

// fleetAgent is the one agent the fleet page's configuration blocks are
// loaded beside (the page shows only its own keys).
const fleetAgent = "agents:\n  - {name: a, upstream: 'http://127.0.0.1:9101', max_data_classification: internal, security_schemes: [oauth2]}\n"

// fleetBlock is the one block of the page's section name, loaded beside
// fleetAgent.
func fleetBlock(t *testing.T, page, name string) *config.Config {
	t.Helper()
	blocks := docrun.Section(t, page, name)
	if len(blocks) != 1 {
		t.Fatalf("%s: %d blocks", name, len(blocks))
	}
	c, err := config.Parse([]byte(fleetAgent + blocks[0].Text))
	if err != nil {
		t.Fatalf("%s as printed: %v", name, err)
	}
	return c
}

// TestFleetPage runs docs/fleet.md's examples as printed: every
// configuration block loads with the values the page gives, and the
// bundle is built and signed by the page's commands (the stock opa CLI, in
// a git checkout of the policies), then served from loopback to a writ
// configured by the page's policy_bundle block (its URL, key and
// directory pointed at the test's): writ verifies it, runs its tests and
// serves it under the commit's revision.
func TestFleetPage(t *testing.T) {
	root, err := writproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "fleet.md")

	b := fleetBlock(t, page, "fleet-bundle").PolicyBundle
	if b == nil || b.URL != "https://bundles.bank.ae/writ/bundle.tar.gz" || b.PollMin != 10*time.Second || b.LongPoll != time.Minute ||
		b.Signing == nil || b.Signing.KeyID != "writ" || b.Signing.Scope != "writ" || b.PersistDir != "/var/lib/writ/bundle" {
		t.Errorf("policy_bundle as printed: %+v", b)
	}
	oci := fleetBlock(t, page, "fleet-bundle-oci").PolicyBundle
	if ref, err := config.OCIReference(oci.URL); oci == nil || oci.Type != config.BundleOCI || err != nil || ref != "ghcr.io/acme/writ-policy:prod" ||
		oci.PollMin != 30*time.Second || oci.Signing == nil || oci.Signing.Scope != "writ" || oci.PersistDir != "/var/lib/writ/bundle" {
		t.Errorf("policy_bundle (oci) as printed: %+v (reference %q, %v)", oci, ref, err)
	}
	sh := fleetBlock(t, page, "fleet-shadow")
	if sh.PolicyBundle == nil || sh.PolicyBundleShadow == nil || sh.PolicyBundleShadow.URL != "https://bundles.bank.example/writ/candidate.tar.gz" {
		t.Errorf("the shadow's bundle as printed: %+v %+v", sh.PolicyBundle, sh.PolicyBundleShadow)
	}
	up := fleetBlock(t, page, "fleet-upload").DecisionLog
	if up.Output != "/var/log/writ/decisions.jsonl" || up.Upload == nil || up.Upload.URL != "https://logs.bank.example" ||
		up.Upload.Resource != "/logs" || len(up.Upload.Mask) != 1 || up.Upload.TokenFile == "" || !up.Upload.ShipsLifecycle() {
		t.Errorf("decision_log.upload as printed: %+v %+v", up, up.Upload)
	}
	st := fleetBlock(t, page, "fleet-status")
	if st.Status == nil || st.Status.URL != "https://status.bank.example" || st.Status.PartitionName != "payments" || st.Labels["cluster"] != "dxb-1" {
		t.Errorf("status as printed: %+v %v", st.Status, st.Labels)
	}

	opa := filepath.Join(root, ".tools", "opa")
	for _, tool := range []string{opa, "openssl", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the page's build commands need %s (make opa builds the stock OPA CLI): %v", tool, err)
		}
	}
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "policies"), os.DirFS(filepath.Join(root, "policies"))); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"embed.go", "limits_test.go"} { // Go files of the checkout, not policy
		_ = os.Remove(filepath.Join(dir, "policies", f))
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "policies")
	git("commit", "-qm", "policies")
	rev := git("rev-parse", "--short", "HEAD")
	runner := docrun.Runner{Dir: dir, Env: append(os.Environ(), "PATH="+filepath.Dir(opa)+string(os.PathListSeparator)+os.Getenv("PATH"))}
	runner.Run(t, docrun.Section(t, page, "fleet-bundle-build"))

	// The bundle the commands built, served; the page's policy_bundle,
	// pointed at it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.StripPrefix("/writ/", http.FileServer(http.Dir(dir)))}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	cfg := fleetBlock(t, page, "fleet-bundle")
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DecisionLog.Output, cfg.Push.Disabled = "off", true
	cfg.Store.Kind = config.StoreMemory
	cfg.PolicyBundle.URL = "http://" + ln.Addr().String() + "/writ/bundle.tar.gz"
	cfg.PolicyBundle.Signing.PublicKeyFile = filepath.Join(dir, "bundle-signing.pub.pem")
	cfg.PolicyBundle.PersistDir = filepath.Join(dir, "persisted")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := server.New(t.Context(), cfg, server.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("writ with the page's bundle: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	if got := s.Engine().Revision(); !strings.HasSuffix(got, "@"+rev) {
		t.Errorf("serving revision %s, want the commit's bundle (@%s)", got, rev)
	}
	if p := s.Engine().Policy(); p.Tests.Passed == 0 {
		t.Errorf("the bundle's Rego tests did not run: %+v", p.Tests)
	}
}
