package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCIDepsLeavesTheHostAlone runs .ci/deps (what `make test` runs first)
// against a stub apt-get on a PATH where node, npm, chromium and
// redis-server are missing: it installs exactly those, without recommends
// and with --no-upgrade, says so, and refuses an install whose simulation
// would upgrade an installed package.
func TestCIDepsLeavesTheHostAlone(t *testing.T) {
	// make test runs .ci/deps with bash: a host without it cannot run the
	// suite at all, so its absence is a failure, not a skip.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is not on PATH: make test needs it")
	}
	for name, plan := range map[string]string{
		"new packages only": "Inst nodejs (18 Debian)\nInst npm (9 Debian)\nInst chromium (1 Debian)\nInst redis-server (7 Debian)\n",
		"an upgrade":        "Inst libc6 [2.36-1] (2.36-9 Debian)\nInst nodejs (18 Debian)\n",
	} {
		bin := t.TempDir()
		calls := filepath.Join(bin, "calls")
		stub := func(name, body string) {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+bash+"\n"+body+"\n"), 0o755); err != nil { //nolint:gosec // a stub command must be executable
				t.Fatal(err)
			}
		}
		stub("id", "echo 0")
		stub("awk", `exec `+mustLook(t, "awk")+` "$@"`)
		stub("apt-get", `echo "$*" >> `+calls+`
case "$1" in -s) printf '%s' '`+plan+`';; esac`)
		cmd := exec.Command(bash, "../../.ci/deps")
		cmd.Env = []string{"PATH=" + bin}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		raw, err := os.ReadFile(calls)
		if err != nil {
			t.Fatalf("%s: apt-get was never called: %v", name, err)
		}
		got := string(raw)
		install := "install -y -qq --no-install-recommends --no-upgrade nodejs npm chromium redis-server"
		switch name {
		case "new packages only":
			if !strings.Contains(got, "\n"+install) || !strings.Contains(string(out), "installing nodejs npm chromium redis-server") {
				t.Errorf("%s: calls\n%s\noutput\n%s", name, got, out)
			}
		case "an upgrade":
			if strings.Contains(got, "\n"+install) || !strings.Contains(string(out), "would upgrade installed packages (libc6)") {
				t.Errorf("%s: calls\n%s\noutput\n%s", name, got, out)
			}
		}
	}
}

func mustLook(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: .ci/deps needs it", name)
	}
	return p
}
