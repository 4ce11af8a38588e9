package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/docrun"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

// asWritEnv makes the test binary the writ command (TestMain).
const asWritEnv = "WRIT_TEST_AS_WRIT"

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
	blocks := docrun.Section(t, "../../README.md", "your-own-agent")
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
	got := docrun.Runner{Dir: dir, Env: env, Ready: func(t testing.TB, _ docrun.Block, log *syncbuf.Buffer) {
		waitReady(t, "http://"+admin+"/readyz", log)
	}}.Run(t, blocks)
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

func waitReady(t testing.TB, url string, log *syncbuf.Buffer) {
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
