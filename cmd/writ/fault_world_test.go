package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/writproc"
)

// The fault tests of `writ serve` (docs/soak-and-faults.md) run it as a child — this
// test binary re-executed as writ (see TestMain), so in `make test` the child
// has the race detector too — in front of the seed's a2a-go agent, with
// steady traffic, and read it as an operator would: its answers, /metrics,
// /v1/policy and /debug/pprof (goroutines besides HTTP connections').

const (
	fwIssuer   = "https://idp.fault.test"
	fwAudience = "writ"
)

// fwWrit is one writ under a fault and what it fronts.
type fwWrit struct {
	*writproc.Proc
	t        *testing.T
	dir      string
	policies string
	idp      *devidp.Provider
	agent    *seedagents.Agent
	token    string // allowed to delegate
	outsider string // another tenant: denied TENANT_NOT_PERMITTED
}

// fwOptions shape a fault writ's configuration.
type fwOptions struct {
	// identity replaces the identity block (default: the test IdP's JWKS file).
	identity string
	// extra is appended at the top level (push:, limits:, ...).
	extra string
	// store replaces the store block (default: a file store in the test's
	// directory).
	store string
	// slow puts the seed's slow agent (working for this long, then done) in
	// front instead of the sanctions agent.
	slow time.Duration
	// decisionLog writes the decision log to dir/decisions.jsonl (default off).
	decisionLog bool
	// decisionLogTo writes the decision log to this file instead, unread.
	decisionLogTo string
}

// reexec runs this test binary as writ with args (TestMain sees stChildEnv).
func reexec(args []string) *exec.Cmd {
	raw, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stChildEnv+"="+string(raw))
	return cmd
}

func startFaultWrit(t *testing.T, o fwOptions) *fwWrit {
	t.Helper()
	dir := t.TempDir()
	w := &fwWrit{t: t, dir: dir}
	var err error
	if w.idp, err = devidp.New(dir, fwIssuer, fwAudience); err != nil {
		t.Fatal(err)
	}
	if o.slow > 0 {
		w.agent, err = seedagents.StartSlow(seedagents.WithDelay(o.slow))
	} else {
		w.agent, err = seedagents.StartSanctions()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.agent.Close() })
	w.policies = writproc.CopyPolicies(t, filepath.Join(dir, "policies"), "127.0.0.1")
	w.token = w.tok(devidp.Caller{Agent: "fault-bot", User: "u-1", Tenant: "wholesale", Classification: "internal", Scope: "delegate"})
	w.outsider = w.tok(devidp.Caller{Agent: "corp-bot", User: "u-2", Tenant: "corporate", Classification: "internal", Scope: "delegate"})
	if o.identity == "" {
		o.identity = fmt.Sprintf("identity:\n  jwt: [{issuer: '%s', audiences: [%s], jwks_file: '%s'}]\n", fwIssuer, fwAudience, w.idp.JWKSFile)
	}
	if o.store == "" {
		o.store = writproc.StoreSection(dir)
	}
	dlog, logPath := "decision_log: {output: 'off'}\n", ""
	if o.decisionLog {
		logPath = filepath.Join(dir, "decisions.jsonl")
		dlog = fmt.Sprintf("decision_log: {output: '%s'}\n", logPath)
	}
	if o.decisionLogTo != "" {
		dlog = fmt.Sprintf("decision_log: {output: '%s'}\n", o.decisionLogTo)
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
admin_pprof: true
policies: ['%s']
%s%s%s%sagents:
  - {name: sanctions-screening-agent, route: /, upstream: '%s', protocol: a2a, owner: compliance,
     tenants: [wholesale], max_data_classification: restricted, security_schemes: [oauth2],
     skills: [{id: screen, tags: [sanctions]}]}
`, w.policies, dlog, o.identity, o.store, o.extra, w.agent.URL)
	w.Proc = writproc.Start(t, "", yaml, writproc.Options{Dir: dir, Command: reexec, DecisionLog: logPath})
	return w
}

func (w *fwWrit) tok(c devidp.Caller) string {
	w.t.Helper()
	s, err := w.idp.Token(c)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// send posts one A2A 0.3 message/send with token and returns the status and
// the body; it never touches t (safe off the test goroutine).
func (w *fwWrit) send(ctx context.Context, token string, config map[string]any) (int, []byte, error) {
	st, _, body, err := w.sendFull(ctx, token, config)
	return st, body, err
}

// sendFull is send with the answer's headers.
func (w *fwWrit) sendFull(ctx context.Context, token string, config map[string]any) (int, http.Header, []byte, error) {
	params := map[string]any{"message": map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()),
		"role": "user", "parts": []any{map[string]any{"kind": "text", "text": "Screen the beneficiary of PMT-771"}}}}
	if config != nil {
		params["configuration"] = config
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL+"/", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body, err
}

// completed: an answer is the agent's completed task.
func completed(st int, body []byte, err error) bool {
	return err == nil && st == http.StatusOK && bytes.Contains(body, []byte(`"state":"completed"`))
}

// deniedTenant: an answer is writ's denial of the outsider, by the policy
// (so a policy is serving).
func deniedTenant(st int, body []byte, err error) bool {
	return err == nil && st == http.StatusForbidden && bytes.Contains(body, []byte("TENANT_NOT_PERMITTED"))
}

// steady runs allowed sends and the outsider's denied ones until stop is
// called; stop fails the test for every answer that was not what the
// policy says, and returns how many requests ran.
func (w *fwWrit) steady(t *testing.T, workers int, tokens ...string) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	if len(tokens) == 0 {
		tokens = []string{w.token}
	}
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ctx.Err() == nil; k++ {
				var ok bool
				var st int
				var body []byte
				var err error
				if k%5 == 4 {
					st, body, err = w.send(ctx, w.outsider, nil)
					ok = deniedTenant(st, body, err)
				} else {
					st, body, err = w.send(ctx, tokens[(i+k)%len(tokens)], nil)
					ok = completed(st, body, err)
				}
				if ctx.Err() != nil {
					return
				}
				if !ok {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%d %v %.300s", st, err, body))
					mu.Unlock()
				}
				n.Add(1)
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	return func() int {
		cancel()
		wg.Wait()
		for i, b := range bad {
			if i == 10 {
				t.Errorf("... and %d more", len(bad)-10)
				break
			}
			t.Errorf("a request under the fault was not answered as the policy says: %s", b)
		}
		return int(n.Load())
	}
}

// idleGoroutines is writ's goroutine count besides HTTP connections'.
func (w *fwWrit) idleGoroutines(t *testing.T) int {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	n, _, err := w.NonConnGoroutines()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// settled: writ is alive and its goroutines (besides HTTP connections')
// come back to want.
func (w *fwWrit) settled(t *testing.T, want int) {
	t.Helper()
	if !w.Alive() {
		t.Fatal("writ exited under the fault")
	}
	http.DefaultClient.CloseIdleConnections()
	var n int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if n, _, err = w.NonConnGoroutines(); err != nil {
			t.Fatal(err)
		}
		if n <= want || time.Now().After(deadline) {
			break
		}
	}
	if n > want {
		_, prof, _ := w.Get("/debug/pprof/goroutine?debug=1")
		t.Errorf("writ's goroutines besides HTTP connections' did not come back: %d, %d before\n%s", n, want, prof)
	}
}

// policyWait polls /v1/policy until ok says so.
func (w *fwWrit) policyWait(t *testing.T, what string, ok func(writproc.PolicyInfo) bool) writproc.PolicyInfo {
	t.Helper()
	var pi writproc.PolicyInfo
	// Each reload runs the set's own tests (a few hundred): on a loaded CI
	// machine a directory replaced whole queues several of them (one per
	// burst of file events, and the SIGHUP), each several seconds long. The
	// bound is for a reload that never comes, not a speed limit: 15 s failed
	// a run with its good reload still in its tests (CI, another package's
	// tests beside it).
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if pi, err = w.Policy(); err == nil && ok(pi) {
			return pi
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /v1/policy %+v (%v)", what, pi, err)
		}
	}
}

func reloads(pi writproc.PolicyInfo) (ok, failed uint64) {
	if pi.Reloads == nil {
		return 0, 0
	}
	return pi.Reloads.OK, pi.Reloads.Failed
}

// hup sends SIGHUP.
func (w *fwWrit) hup(t *testing.T) {
	t.Helper()
	if err := w.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// logHas reports whether writ logged a line containing all of the strings.
func (w *fwWrit) logHas(all ...string) bool {
	for _, l := range strings.Split(w.Log(), "\n") {
		ok := true
		for _, s := range all {
			if !strings.Contains(l, s) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// relisten opens addr again for a server a fault test took down (what names
// it): the port may take a moment to be free, so it tries for a second.
func relisten(t *testing.T, addr, what string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s back on %s: %v", what, addr, err)
	return nil
}
