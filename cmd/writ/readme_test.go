package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

// asWritEnv makes the test binary the writ command (TestMain).
const asWritEnv = "WRIT_TEST_AS_WRIT"

// readmeBlock is one marked block of README: <!-- readme-test SECTION: KIND -->
// before a fenced block, KIND being run (a shell script), background (a
// shell script left running) or file NAME (the block's text, written to NAME).
type readmeBlock struct {
	kind, file, text string
}

var readmeBlockRE = regexp.MustCompile("(?s)<!-- readme-test ([a-z0-9-]+): (run|background|file [^ ]+) -->\\s*\\n```[a-z]*\\n(.*?)\\n```")

// readmeSection extracts a section's blocks from README, in order.
func readmeSection(t *testing.T, name string) []readmeBlock {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeBlock
	for _, m := range readmeBlockRE.FindAllStringSubmatch(string(raw), -1) {
		if m[1] != name {
			continue
		}
		b := readmeBlock{kind: m[2], text: m[3] + "\n"}
		if f, ok := strings.CutPrefix(m[2], "file "); ok {
			b.kind, b.file = "file", f
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatalf("README has no readme-test %s blocks", name)
	}
	return out
}

// writOnPath puts a `writ` on PATH that is this test binary as the writ
// command: the same run() main calls, built from this source.
func writOnPath(t *testing.T) string {
	t.Helper()
	exe, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", asWritEnv, exe)
	if err := os.WriteFile(filepath.Join(bin, "writ"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestREADMEYourOwnAgent runs README's "Put writ in front of your own agent"
// exactly as printed (extracted from README, not copied here) against a real
// a2a-go agent: the development key, the config, writ validate, writ serve,
// and a caller with scope delegate answered by the agent, one without it
// refused with SCOPE_MISSING.
func TestREADMEYourOwnAgent(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("README's commands need %s", tool)
		}
	}
	blocks := readmeSection(t, "your-own-agent")
	agent, err := seedagents.StartSanctions(seedagents.WithName("my-agent"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	dir := t.TempDir()
	admin := writproc.FreeAddr(t)
	env := append(os.Environ(),
		"PATH="+writOnPath(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"WRIT_LISTEN="+writproc.FreeAddr(t), "WRIT_ADMIN="+admin, "AGENT_URL="+agent.URL)
	var output bytes.Buffer
	for i, b := range blocks {
		switch b.kind {
		case "file":
			if err := os.WriteFile(filepath.Join(dir, b.file), []byte(b.text), 0o600); err != nil {
				t.Fatal(err)
			}
		case "run":
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.text)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			output.Write(out)
			if err != nil {
				t.Fatalf("README block %d failed: %v\n%s\n--- output:\n%s", i, err, b.text, out)
			}
		case "background":
			var log syncbuf.Buffer
			cmd := exec.Command("bash", "-c", b.text)
			cmd.Dir, cmd.Env = dir, env
			cmd.Stdout, cmd.Stderr = &log, &log
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				_ = cmd.Wait()
				if t.Failed() {
					t.Logf("--- %s:\n%s", strings.TrimSpace(b.text), log.String())
				}
			})
			waitReady(t, "http://"+admin+"/readyz", &log)
		}
	}
	got := output.String()
	for _, want := range []string{"ok: writ.yaml", `"result":{`, "SCOPE_MISSING"} {
		if !strings.Contains(got, want) {
			t.Errorf("README's commands did not print %q:\n%s", want, got)
		}
	}
	sent := 0
	for _, o := range agent.Requests() {
		if o.Method == "message/send" {
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("the agent received %d sends, want 1 (the one with scope delegate)", sent)
	}
}

func waitReady(t *testing.T, url string, log *syncbuf.Buffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60s:\n%s", url, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
