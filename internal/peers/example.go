package peers

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

// StartJSExample starts the example agent users copy,
// examples/js-agent/agent.mjs (A2A 1.0, and 0.3 through the SDK's
// legacyCompat), on a free 127.0.0.1 port, waits until it serves its card
// and returns its base URL. A cleanup stops it; it dies with the test
// process.
func StartJSExample(t testing.TB) (baseURL string) {
	t.Helper()
	dir := EnsureNodeDir(t, filepath.Join("examples", "js-agent"))
	addr := writproc.FreeAddr(t)
	cmd := exec.Command("node", "agent.mjs")
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "PORT="+addr[strings.LastIndexByte(addr, ':')+1:])
	var log syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start examples/js-agent: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("examples/js-agent:\n%s", log.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(readyTimeout)
	for {
		if resp, err := http.Get(base + "/.well-known/agent-card.json"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("examples/js-agent did not serve its card within %s:\n%s", readyTimeout, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
