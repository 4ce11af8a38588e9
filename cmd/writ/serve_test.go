package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeRefusesBadPolicy: a policy set with a syntax error refuses the start,
// naming the file; so does an invalid config key.
func TestServeRefusesBadPolicy(t *testing.T) {
	chdirRoot(t)
	raw, err := os.ReadFile("testdata/config/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "broken.rego"), []byte("package writ.authz\n\ndecision := {\n"), 0o644)
	cfg := filepath.Join(t.TempDir(), "writ.yaml")
	os.WriteFile(cfg, raw, 0o644)
	code, _, errOut := runCLI(t, "", "serve", "-config", cfg, "-policies", dir, "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "refusing to start") || !strings.Contains(errOut, "broken.rego") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "serve", "-config", cfg, "-upstream", "ftp://nowhere", "-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "agents[0].upstream") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
