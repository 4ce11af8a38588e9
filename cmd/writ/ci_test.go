package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestCIFuzzFailsOnlyOnFindings runs .ci/fuzz over a module of one fuzz
// target with a stub go on PATH that plays each way a fuzz run can end: a
// bare coordinator deadline with nothing written passes, counted as a flake
// (golang/go#75804), once the corpus replays clean; an input written under
// testdata/fuzz, a panic, a deadline whose replay fails and any other failure
// fail the run. The target's budget comes from the budget file as a count.
func TestCIFuzzFailsOnlyOnFindings(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is not on PATH: make test needs it")
	}
	script, err := filepath.Abs("../../.ci/fuzz")
	if err != nil {
		t.Fatal(err)
	}
	const deadline = "fuzz: elapsed: 6s, execs: 27078 (0/sec), new interesting: 7 (total: 32)\n" +
		"--- FAIL: FuzzA (6.01s)\n    context deadline exceeded\nFAIL\nexit status 1\nFAIL\texample/pkg\t6.1s\n"
	for _, c := range []struct {
		name, fuzz string // the stub's answer to the fuzzing run
		replay     int    // the stub's exit status for the corpus replay
		wantOK     bool
		want       string
	}{
		{"clean run", "echo 'fuzz: elapsed: 3s, execs: 1234 (400/sec)'; echo PASS; exit 0", 0, true, "1 targets, 0 failed, 0 flakes"},
		{"bare deadline", "printf '" + deadline + "'; exit 1", 0, true, "1 targets, 0 failed, 1 flakes"},
		{"deadline that replays", "printf '" + deadline + "'; exit 1", 1, false, "1 targets, 1 failed, 0 flakes"},
		{"written reproducer", `mkdir -p pkg/testdata/fuzz/FuzzA && echo 'go test fuzz v1' > pkg/testdata/fuzz/FuzzA/c0ffee
printf '--- FAIL: FuzzA (0.20s)\n    x_test.go:9: bad\n    Failing input written to testdata/fuzz/FuzzA/c0ffee\nFAIL\n'; exit 1`, 0, false, "found a failing input"},
		{"reproducer beside a deadline", `mkdir -p pkg/testdata/fuzz/FuzzA && echo 'go test fuzz v1' > pkg/testdata/fuzz/FuzzA/beef
printf '` + deadline + `'; exit 1`, 0, false, "found a failing input"},
		{"panic", `printf 'panic: runtime error: index out of range [3] with length 3\n--- FAIL: FuzzA (0.01s)\nFAIL\n'; exit 2`, 0, false, "1 targets, 1 failed, 0 flakes"},
		{"build failure", `printf '# example/pkg\npkg/x_test.go:3:1: syntax error\nFAIL\texample/pkg [build failed]\n'; exit 1`, 0, false, "1 targets, 1 failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, bin := t.TempDir(), t.TempDir()
			for name, body := range map[string]string{
				"pkg/x_test.go":                "package pkg\n\nimport \"testing\"\n\nfunc FuzzA(f *testing.F) {\n\tf.Fuzz(func(t *testing.T, b []byte) {})\n}\n",
				".ci/fuzz-budget":              "# dir target executions\npkg FuzzA 1234\n",
				"pkg/testdata/fuzz/FuzzA/seed": "go test fuzz v1\n[]byte(\"a\")\n",
			} {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil { //nolint:gosec // test fixtures
					t.Fatal(err)
				}
			}
			calls := filepath.Join(bin, "calls")
			stub := "#!" + bash + "\necho \"$*\" >> " + calls + "\ncase \"$*\" in\n*-fuzz=*) " + c.fuzz + " ;;\n" +
				"*-run=*FuzzA*) exit " + strconv.Itoa(c.replay) + " ;;\nesac\nexit 3\n"
			if err := os.WriteFile(filepath.Join(bin, "go"), []byte(stub), 0o755); err != nil { //nolint:gosec // a stub command must be executable
				t.Fatal(err)
			}
			cmd := exec.Command(bash, script)
			cmd.Env = append(os.Environ(), "FUZZ_ROOT="+root, "GO="+filepath.Join(bin, "go"), "FUZZTIME=budget")
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.wantOK || !strings.Contains(string(out), c.want) {
				t.Fatalf("exit error %v (want ok %v), want %q in:\n%s", err, c.wantOK, c.want, out)
			}
			raw, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), "test ./pkg -run=^$ -fuzz=^FuzzA$ -fuzztime=1234x") {
				t.Errorf("the fuzzing run was not given the budget file's count:\n%s", raw)
			}
		})
	}
}
