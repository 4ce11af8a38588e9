package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/demo"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// The scenario's own checks are internal/demo's tests. These test the command:
// writ as `writ serve` wires it behind the demo, -serve, and the commands the
// demo prints.

// marker is program output that closes seen once it contains want.
type marker struct {
	syncbuf.Buffer
	want string
	once sync.Once
	seen chan struct{}
}

func (m *marker) Write(p []byte) (int, error) {
	n, err := m.Buffer.Write(p)
	if strings.Contains(m.String(), m.want) {
		m.once.Do(func() { close(m.seen) })
	}
	return n, err
}

// TestDemoServe: with -serve, writ (the serve wiring) keeps serving after the
// scenario, the printed token and URL work, the admin listener counted the
// scenario, cancelling the context shuts everything down, and the report
// command printed at the end works as printed.
func TestDemoServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	out := &marker{want: "Ctrl-C stops", seen: make(chan struct{})}
	decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
	done := make(chan error, 1)
	go func() {
		done <- demo.Run(serveCtx, out, demo.Options{Listen: "127.0.0.1:0", Serve: true, DecisionLog: decisions,
			Start: demo.StartServer, Command: commandName()})
	}()
	select {
	case <-out.seen:
	case err := <-done:
		t.Fatalf("the demo returned before serving: %v\n%s", err, out.String())
	case <-ctx.Done():
		t.Fatalf("no serving message:\n%s", out.String())
	}
	writ := regexp.MustCompile(`export WRIT=(\S+)`).FindStringSubmatch(out.String())
	token := regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(out.String())
	if writ == nil || token == nil {
		t.Fatalf("no WRIT/TOKEN lines:\n%s", out.String())
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, writ[1]+"/.well-known/writ/directory?tags=sanctions", nil)
	req.Header.Set("Authorization", "Bearer "+token[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var dir struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &dir) != nil || len(dir.Agents) != 3 {
		t.Fatalf("directory while serving: HTTP %d %s", resp.StatusCode, body)
	}
	// The admin listener of writ serve: metrics that counted the scenario,
	// readiness, the policy status.
	admin := regexp.MustCompile(`admin: (http://\S+)/readyz`).FindStringSubmatch(out.String())
	if admin == nil {
		t.Fatalf("no admin URL:\n%s", out.String())
	}
	for path, want := range map[string]string{
		"/metrics":   `writ_decisions_total{mode="sidecar",operation="send",result="deny",route="kyc-refresh-agent"}`,
		"/readyz":    "",
		"/v1/policy": `"revision"`,
	} {
		resp, err := http.Get(admin[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Errorf("admin %s: HTTP %d\n%.2000s", path, resp.StatusCode, body)
		}
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo.Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the demo did not shut down")
	}
	if _, err := http.Get(writ[1] + "/.well-known/writ/directory"); err == nil {
		t.Error("writ still answers after shutdown")
	}

	// The last lines name the decision log and a report command that works
	// as printed (here under go test, whose binary is named like go run's).
	line := regexp.MustCompile(`(?m)^render it as a page:  (.+)$`).FindStringSubmatch(out.String())
	if line == nil || !strings.HasPrefix(line[1], "go run ./cmd/writ report ") {
		t.Fatalf("no report command:\n%s", out.String())
	}
	args := strings.Fields(strings.TrimPrefix(line[1], "go run ./cmd/writ "))
	t.Chdir(t.TempDir())
	if code, _, errOut := runCLI(t, "", args...); code != 0 {
		t.Fatalf("%s: exit %d: %s", line[1], code, errOut)
	}
	if page, err := os.ReadFile("writ-demo-report.html"); err != nil || !strings.Contains(string(page), "kyc-refresh-agent") {
		t.Fatalf("the report: %v %.300s", err, page)
	}
}

// TestDemoLoopbackOnly: the demo refuses to bind anything but a loopback IP.
func TestDemoLoopbackOnly(t *testing.T) {
	code, _, errOut := runCLI(t, "", "demo", "-listen", "0.0.0.0:0")
	if code != 1 || !strings.Contains(errOut, "loopback") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
