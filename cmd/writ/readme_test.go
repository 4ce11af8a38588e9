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
	"github.com/writ-authz/writ/internal/peers"
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
// exactly as printed (extracted from README, not copied here): the
// development key, the config, writ validate, writ serve, and a caller with
// scope delegate answered by the agent, one without it refused with
// SCOPE_MISSING. Against a real a2a-go agent (A2A 0.3) it runs the 0.3
// request; against the @a2a-js/sdk example agent (examples/js-agent: A2A
// 1.0, and 0.3 through legacyCompat) the 0.3 request and then the 1.0 one.
func TestREADMEYourOwnAgent(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("README's commands need %s", tool)
		}
	}
	blocks := docrun.Section(t, "../../README.md", "your-own-agent")
	t.Run("a2a-go", func(t *testing.T) {
		agent, err := seedagents.StartSanctions(seedagents.WithName("my-agent"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { agent.Close() })
		checkSent(t, runYourOwnAgent(t, agent.URL, blocks))
		sent := 0
		for _, o := range agent.Requests() {
			if o.Method == "message/send" {
				sent++
			}
		}
		if sent != 1 {
			t.Errorf("the agent received %d sends, want 1 (the one with scope delegate)", sent)
		}
	})
	t.Run("js-example", func(t *testing.T) {
		v1 := docrun.Section(t, "../../README.md", "your-own-agent-1-0")
		got := runYourOwnAgent(t, peers.StartJSExample(t), append(blocks[:len(blocks):len(blocks)], v1...))
		checkSent(t, got)
		if n := strings.Count(got, `"result":{"kind":"task"`); n != 1 {
			t.Errorf("the 0.3 send was answered with a task %d times, want once:\n%s", n, got)
		}
		if n := strings.Count(got, `"result":{"task":{`); n != 1 {
			t.Errorf("the 1.0 send was answered with a task %d times, want once:\n%s", n, got)
		}
		if n := strings.Count(got, "SCOPE_MISSING"); n < 2 {
			t.Errorf("SCOPE_MISSING printed %d times, want for both versions:\n%s", n, got)
		}
	})
}

// runYourOwnAgent runs blocks in a fresh directory with the test binary as
// writ on PATH, the agent at agentURL, and returns what they printed.
func runYourOwnAgent(t *testing.T, agentURL string, blocks []docrun.Block) string {
	t.Helper()
	dir := t.TempDir()
	admin := writproc.FreeAddr(t)
	env := append(os.Environ(),
		"PATH="+writOnPath(t)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOME="+filepath.Join(dir, "home"), "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"WRIT_LISTEN="+writproc.FreeAddr(t), "WRIT_ADMIN="+admin, "AGENT_URL="+agentURL)
	return docrun.Runner{Dir: dir, Env: env, Ready: func(t testing.TB, _ docrun.Block, log *syncbuf.Buffer) {
		waitReady(t, "http://"+admin+"/readyz", log)
	}}.Run(t, blocks)
}

func checkSent(t *testing.T, got string) {
	t.Helper()
	for _, want := range []string{"ok: writ.yaml", `"result":{`, "SCOPE_MISSING"} {
		if !strings.Contains(got, want) {
			t.Errorf("README's commands did not print %q:\n%s", want, got)
		}
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
