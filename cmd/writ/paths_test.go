package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedFile is testdata/config/seed.yaml (read from the repository root,
// chdirRoot) with its relative paths made absolute, for a test that writes
// it to another directory: a config's relative paths are read from the
// config file's own directory.
func seedFile(t *testing.T) ([]byte, error) {
	t.Helper()
	raw, err := os.ReadFile("testdata/config/seed.yaml")
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs("testdata/config")
	if err != nil {
		return nil, err
	}
	s := strings.Replace(string(raw), "policies: [../../policies]", seedPolicies(t), 1)
	return []byte(strings.ReplaceAll(s, "jwks_file: ../identity/", "jwks_file: "+filepath.Join(dir, "../identity")+"/")), nil
}

// seedYAML is seedFile as a string; a test fails when it cannot be read.
func seedYAML(t *testing.T) string {
	t.Helper()
	raw, err := seedFile(t)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// seedPolicies is the policies line of seedFile's config.
func seedPolicies(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("policies")
	if err != nil {
		t.Fatal(err)
	}
	return "policies: [" + abs + "]"
}

// TestValidateFromAnotherDirectory: `writ validate -config dir/writ.yaml`
// run from a directory that is not the config's reads the config's relative
// paths (a JWKS file, a policy directory, a decision log's signing key) from
// the config file's directory; so do `writ eval` and `writ policy replay`'s
// config, which load it the same way. It failed with "open dev-jwks.json: no
// such file or directory" (issue 27 item 4).
func TestValidateFromAnotherDirectory(t *testing.T) {
	chdirRoot(t)
	root, _ := os.Getwd()
	work := t.TempDir()
	dir := filepath.Join(work, "conf")
	for _, d := range []string{dir, filepath.Join(dir, "rego"), filepath.Join(dir, "keys")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		raw, err := os.ReadFile(filepath.Join(root, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("testdata/identity/bench_jwks.json", "dev-jwks.json")
	entries, _ := os.ReadDir(filepath.Join(root, "policies"))
	for _, e := range entries {
		if !e.IsDir() {
			copyFile(filepath.Join("policies", e.Name()), filepath.Join("rego", e.Name()))
		}
	}
	seed, err := os.ReadFile(filepath.Join(root, "testdata/config/seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(seed), "policies: [../../policies]", "policies: [rego]", 1)
	cfg = strings.Replace(cfg, "jwks_file: ../identity/bench_jwks.json", "jwks_file: dev-jwks.json", 1)
	if err := os.WriteFile(filepath.Join(dir, "writ.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	code, out, errOut := runCLI(t, "", "validate", "-offline", "-config", "conf/writ.yaml")
	if code != 0 || !strings.Contains(out, "ok: conf/writ.yaml: 3 agent(s), policies: conf/rego (revision") {
		t.Fatalf("validate from %s: exit %d\n%s\n%s", work, code, out, errOut)
	}
	req := filepath.Join(root, "adapters/examples/a2a-1.0-send.http")
	code, out, errOut = runCLI(t, "", "eval", "-config", "conf/writ.yaml", "-request", req)
	if code != 1 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("eval from %s: exit %d\n%s\n%s", work, code, out, errOut)
	}
	// A path that is not there is named as the config file's directory has it.
	if err := os.Remove(filepath.Join(dir, "dev-jwks.json")); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "", "validate", "-offline", "-config", "conf/writ.yaml")
	if code != 1 || !strings.Contains(errOut, filepath.Join("conf", "dev-jwks.json")) {
		t.Fatalf("validate without the JWKS file: exit %d\n%s", code, errOut)
	}
}
