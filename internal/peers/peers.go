// Package peers runs the real @a2a-js/sdk peers in testdata/peers/js (an A2A 1.0 agent and client) from Go tests.
package peers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
)

const (
	readyTimeout = 30 * time.Second
	clientLimit  = 30 * time.Second
	npmTimeout   = 5 * time.Minute
	stopTimeout  = 5 * time.Second
	readyMarker  = ".writ-npm-ci-ok" // written into node_modules after a good npm ci
)

// npmDone holds, per directory of the repository, the one npm ci of this
// process (a *npmRun).
var npmDone sync.Map

// npmRun is one directory's npm ci, run once per process.
type npmRun struct {
	once sync.Once
	dir  string
	err  error
}

// EnsureNode skips the test when node is not on PATH; otherwise it makes sure
// testdata/peers/js has its node_modules (running `npm ci` once per process,
// under a lock shared with other test processes, when they are missing or
// incomplete) and returns that directory.
func EnsureNode(t testing.TB) string {
	t.Helper()
	return EnsureNodeDir(t, filepath.Join("testdata", "peers", "js"))
}

// EnsureNodeDir is EnsureNode for the Node.js package at rel (a directory of
// the repository, e.g. examples/js-agent): it skips the test without node,
// runs `npm ci --no-audit --no-fund` there once per process (under the same
// lock) when its node_modules are missing or incomplete, and returns the
// directory.
func EnsureNodeDir(t testing.TB, rel string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not on PATH: CI must run the @a2a-js/sdk peer tests (.ci/run installs Node)")
		}
		t.Skip("node is not on PATH; skipping the @a2a-js/sdk peer tests")
	}
	v, _ := npmDone.LoadOrStore(rel, &npmRun{})
	run := v.(*npmRun)
	run.once.Do(func() { run.dir, run.err = prepare(rel) })
	if run.err != nil {
		t.Fatalf("peers: %v", run.err)
	}
	return run.dir
}

// installed reports whether dir's node_modules are what its package-lock
// names: the ready marker holds the digest of the lock npm ci installed, so
// a checkout whose lock changed (a dependency added) installs again.
func installed(dir string) bool {
	for _, p := range []string{
		filepath.Join("node_modules", "@a2a-js", "sdk", "package.json"),
		filepath.Join("node_modules", "express", "package.json"),
	} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return false
		}
	}
	mark, err := os.ReadFile(filepath.Join(dir, "node_modules", readyMarker))
	want, lerr := lockDigest(dir)
	return err == nil && lerr == nil && string(mark) == want
}

// lockDigest is the hex SHA-256 of dir's package-lock.json.
func lockDigest(dir string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// prepare finds the package at rel and runs npm ci there if needed. A lock
// directory keeps concurrent test processes (go test ./...) from running npm ci
// over each other or using a half-installed tree.
func prepare(rel string) (string, error) {
	root, err := writproc.RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, rel)
	if installed(dir) {
		return dir, nil
	}
	unlock, err := lockDir(filepath.Join(dir, ".npm-ci.lock"), npmTimeout)
	if err != nil {
		return "", err
	}
	defer unlock()
	if installed(dir) {
		return dir, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("node is on PATH but npm is not, and %s/node_modules is missing", dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	digest, err := lockDigest(dir)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "node_modules", readyMarker), []byte(digest), 0o600); err != nil {
		return "", err
	}
	return dir, nil
}

// lockDir takes a lock by creating path (a directory), waiting up to limit.
// A lock older than limit is taken to be left over by a dead process.
func lockDir(path string, limit time.Duration) (func(), error) {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := os.Mkdir(path, 0o755)
		if err == nil {
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > limit {
			_ = os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("timed out waiting for %s", path)
		}
		<-tick.C
	}
}

// readyWriter watches the agent's stdout for its READY line.
type readyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan string
	sent  bool
}

// Write collects output and reports its first line.
func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if line, _, ok := bytes.Cut(w.buf.Bytes(), []byte("\n")); ok {
			w.sent = true
			w.ready <- strings.TrimSpace(string(line))
		}
	}
	return len(p), nil
}

// StartJSAgent starts `node agent.mjs --agent <agent>` (sanctions, clarifier,
// slow or librarian) on a free 127.0.0.1 port, advertising cardURL on its
// card when it is not empty, waits for its READY line and returns its base
// URL (http://127.0.0.1:port). A cleanup stops it; it also exits on its own if
// the test process dies (its stdin closes).
func StartJSAgent(t testing.TB, agent string, cardURL string, extra ...string) (baseURL string) {
	t.Helper()
	args := append([]string{"agent.mjs", "--agent", agent, "--port", "0"}, extra...)
	if cardURL != "" {
		args = append(args, "--card-url", cardURL)
	}
	return startScript(t, "agent.mjs --agent "+agent, args)
}

// StartJSDifferential starts `node differential.mjs` (see that file): the
// @a2a-js/sdk server's JSON-RPC and REST handlers, A2A 1.0 and 0.3
// (legacyCompat), over a request handler that executes nothing and records
// what each request asked it to do. It returns the base URL; a cleanup stops
// it. Read the records with JSDifferentialRecords.
func StartJSDifferential(t testing.TB) (baseURL string) {
	t.Helper()
	return startScript(t, "differential.mjs", []string{"differential.mjs", "--port", "0"})
}

// DiffRecord is what the JS SDK's server was asked to do by one request: the
// operation (writ's names: send, stream, get, cancel, ...) and the ids and
// push URL it acted on.
type DiffRecord struct {
	Op        string `json:"op"`
	TaskID    string `json:"taskId"`
	ContextID string `json:"contextId"`
	PushURL   string `json:"pushUrl"`
	ConfigID  string `json:"configId"`
}

// JSDifferentialRecords returns, per X-Diff-Case header value, every call the
// differential server's handler received, and forgets them. A case that the
// SDK refused before reaching its handler has no entry.
func JSDifferentialRecords(t testing.TB, baseURL string) map[string][]DiffRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	get, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/_diff/records", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatalf("differential records: %v", err)
	}
	defer resp.Body.Close()
	var out map[string][]DiffRecord
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("differential records: %v", err)
	}
	del, err := http.NewRequestWithContext(ctx, http.MethodDelete, baseURL+"/_diff/records", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(del); err != nil {
		t.Fatalf("differential records: %v", err)
	} else {
		resp.Body.Close()
	}
	return out
}

// startScript runs `node <args>` in testdata/peers/js, waits for its
// `READY <port>` line and returns http://127.0.0.1:port. A cleanup stops it;
// it also exits on its own if the test process dies (its stdin closes).
func startScript(t testing.TB, label string, args []string) (baseURL string) {
	t.Helper()
	dir := EnsureNode(t)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Stdin = stdinR
	out := &readyWriter{ready: make(chan string, 1)}
	stderr := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		_ = stdinR.Close()
		_ = stdinW.Close()
		t.Fatalf("start %s: %v", label, err)
	}
	_ = stdinR.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	stop := func() {
		_ = stdinW.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-exited:
		case <-timer.C:
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	var line string
	select {
	case line = <-out.ready:
	case err := <-exited:
		_ = stdinW.Close()
		t.Fatalf("%s exited before READY: %v\n%s", label, err, stderr.String())
	case <-timer.C:
		stop()
		t.Fatalf("%s: no READY line within %s\n%s", label, readyTimeout, stderr.String())
	}
	port, ok := strings.CutPrefix(line, "READY ")
	if !ok || port == "" {
		stop()
		t.Fatalf("%s printed %q, want READY <port>\n%s", label, line, stderr.String())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if s := stderr.String(); s != "" {
				t.Logf("%s stderr:\n%s", label, s)
			}
		}
	})
	return "http://127.0.0.1:" + port
}

// RunJSClient runs `node client.mjs <args>` (see testdata/peers/js/client.mjs:
// --url, --token, --scenario send|stream|clarify|cancel, --binding
// jsonrpc|rest) with a 30s limit and returns its JSON output lines. The error
// is non-nil when the client exits non-zero (the lines are still returned: the
// last one usually holds {"error":{...}}) or prints a line that is not JSON.
func RunJSClient(t testing.TB, args ...string) ([]map[string]any, error) {
	t.Helper()
	return RunScript(t, clientLimit, "client.mjs", args...)
}

// JSAgentRequests returns what the JS agent at baseURL has received so far
// (its GET /_writ/requests; the last 1000 requests, oldest first). Method is
// the A2A 1.0 method name (SendMessage, SendStreamingMessage, CancelTask, ...)
// or "GET /path" for other routes; header names are canonicalised.
func JSAgentRequests(t testing.TB, baseURL string) []seedagents.Observed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/_writ/requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("JS agent requests: %v", err)
	}
	defer resp.Body.Close()
	var raw []seedagents.Observed
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatalf("JS agent requests: %v", err)
	}
	for i := range raw {
		h := make(http.Header, len(raw[i].Header))
		for k, vs := range raw[i].Header {
			for _, v := range vs {
				h.Add(k, v)
			}
		}
		raw[i].Header = h
	}
	return raw
}
