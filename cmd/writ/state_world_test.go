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
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/internal/writproc"
	"github.com/writ-authz/writ/policies"
)

// The state tests run `writ serve` as a child process — this test binary,
// re-executed with stChildEnv naming its arguments — in front of real a2a-go
// agents, so that it can be killed with SIGKILL and started again.

const stChildEnv = "WRIT_TEST_SERVE_ARGS"

func TestMain(m *testing.M) {
	if os.Getenv(asWritEnv) == "1" {
		// This test binary as the writ command (main calls run the same way):
		// README's commands run through it (readme_test.go).
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	if raw := os.Getenv(stChildEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, "bad", stChildEnv, err)
			os.Exit(2)
		}
		os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const (
	stIssuer   = "https://idp.state.test"
	stAudience = "writ"
)

// stWorld is what the writ children run against: the seed's clarifier and slow
// agents (a2a-go), an identity provider, the shipped policies with this test's
// receiver allowed as a callback, and that receiver.
type stWorld struct {
	t         *testing.T
	dir       string
	idp       *devidp.Provider
	clarifier *seedagents.Agent
	slow      *seedagents.Agent
	policies  string
	rcv       *stReceiver
}

func newStWorld(t *testing.T, slowDelay time.Duration) *stWorld {
	t.Helper()
	w := &stWorld{t: t, dir: t.TempDir()}
	var err error
	if w.idp, err = devidp.New(w.dir, stIssuer, stAudience); err != nil {
		t.Fatal(err)
	}
	if w.clarifier, err = seedagents.StartClarifier(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.clarifier.Close() })
	if w.slow, err = seedagents.StartSlow(seedagents.WithDelay(slowDelay)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.slow.Close() })
	w.rcv = newStReceiver(t)
	w.policies = filepath.Join(w.dir, "policies")
	if err := os.CopyFS(w.policies, policies.FS); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(w.policies, "data.json")
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), `"wholesale": ["agents.bank.ae"]`, `"wholesale": ["agents.bank.ae", "127.0.0.1"]`, 1)
	s = strings.Replace(s, `"allow_http_hosts": []`, `"allow_http_hosts": ["127.0.0.1"]`, 1)
	if s == string(raw) {
		t.Fatal("the shipped data.json changed shape: cannot allow the test's receiver")
	}
	if err := os.WriteFile(data, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// config writes a writ.yaml in front of both agents with the given store
// section (YAML, indented under store:) and returns its path.
func (w *stWorld) config(name, store string) string {
	w.t.Helper()
	agent := func(name, route, up string) string {
		return fmt.Sprintf(`  - name: %s
    route: %s
    upstream: %s
    protocol: a2a
    owner: group-compliance
    tenants: [wholesale, retail]
    max_data_classification: restricted
    security_schemes: [oauth2]
    skills: [{id: screen, tags: [sanctions, compliance, screening]}]
`, name, route, up)
	}
	yaml := fmt.Sprintf(`policies: [%s]
decision_log: {output: "off"}
limits: {upstream_timeout: 10s}
identity:
  jwt:
    - issuer: %s
      audiences: [%s]
      jwks_file: %s
      algorithms: [ES256]
push:
  trusted_hosts: [127.0.0.1]
  max_attempts: 1000
store:
%s
agents:
%s%s`, w.policies, stIssuer, stAudience, w.idp.JWKSFile, store,
		agent("sanctions-clarifier", "/clarifier", w.clarifier.URL), agent("sanctions-slow", "/slow", w.slow.URL))
	path := filepath.Join(w.dir, name)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return path
}

// stCaller is who a test token speaks for.
type stCaller struct{ agent, user, tenant, class string }

var (
	stAlice = stCaller{"payments-investigator", "u-42", "wholesale", "restricted"}
	stBob   = stCaller{"kyc-ops-bot", "u-7", "retail", "confidential"}
)

func (w *stWorld) token(c stCaller) string {
	tok, err := w.idp.Token(devidp.Caller{Agent: c.agent, User: c.user, Tenant: c.tenant, Classification: c.class,
		Scope: "delegate", Chain: []string{"orchestrator"}})
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// stWrit is one `writ serve` child.
type stWrit struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	url    string
	admin  string
	log    *syncbuf.Buffer
	exited chan struct{}
}

// start runs `writ serve -config cfg` as a child and waits until it is ready.
func (w *stWorld) start(name, cfg string) *stWrit {
	w.t.Helper()
	listen, admin := writproc.FreeAddr(w.t), writproc.FreeAddr(w.t)
	args, _ := json.Marshal([]string{"serve", "-config", cfg, "-listen", listen, "-admin", admin})
	p := &stWrit{t: w.t, name: name, url: "http://" + listen, admin: "http://" + admin, log: &syncbuf.Buffer{},
		exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), stChildEnv+"="+string(args))
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	w.t.Cleanup(func() {
		p.kill()
		if w.t.Failed() {
			w.t.Logf("--- %s log:\n%s", p.name, p.log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := p.readyz(); code == http.StatusOK {
			return p
		}
		select {
		case <-p.exited:
			w.t.Fatalf("%s exited at start:\n%s", name, p.log.String())
		default:
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s not ready after 30s:\n%s", name, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (p *stWrit) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func (p *stWrit) readyz() (int, string) {
	resp, err := http.Get(p.admin + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// record is the task's lifecycle record through the admin API.
func (p *stWrit) record(agent, id string) (map[string]any, int) {
	p.t.Helper()
	resp, err := http.Get(p.admin + "/v1/agents/" + agent + "/tasks/" + id)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rec map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&rec)
	return rec, resp.StatusCode
}

// client is a real a2a-go client for one of writ's routes, as c.
func (w *stWorld) client(p *stWrit, route string, c stCaller) *a2aclient.Client {
	w.t.Helper()
	cl, err := a2aclient.NewFromEndpoints(context.Background(),
		[]a2a.AgentInterface{{URL: p.url + route, Transport: a2a.TransportProtocolJSONRPC}},
		a2aclient.WithJSONRPCTransport(&http.Client{Timeout: 20 * time.Second}),
		a2aclient.WithInterceptors(stBearer(w.token(c))))
	if err != nil {
		w.t.Fatal(err)
	}
	return cl
}

type stBearer string

func (b stBearer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	req.Meta["Authorization"] = []string{"Bearer " + string(b)}
	return ctx, nil
}

func (stBearer) After(context.Context, *a2aclient.Response) error { return nil }

// rpc is one raw JSON-RPC call through writ: the HTTP status and the body.
func (w *stWorld) rpc(p *stWrit, route string, c stCaller, method string, params any) (int, string) {
	w.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, p.url+route, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.token(c))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func stMessage(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text},
		a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})}
}

// stNotice is one notification the receiver got.
type stNotice struct {
	token, taskID, state string
}

// stReceiver is a push receiver on a fixed loopback port that can go down
// (its listener closed: connections refused) and come back.
type stReceiver struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
	got  []stNotice
}

func newStReceiver(t *testing.T) *stReceiver {
	r := &stReceiver{t: t, addr: writproc.FreeAddr(t)}
	r.up()
	t.Cleanup(r.down)
	return r
}

func (r *stReceiver) URL() string { return "http://" + r.addr + "/cb" }

func (r *stReceiver) up() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return
	}
	var ln net.Listener
	var err error
	for range 100 { // the port may linger a moment after down
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		var t a2a.Task
		_ = json.NewDecoder(req.Body).Decode(&t)
		r.mu.Lock()
		r.got = append(r.got, stNotice{req.Header.Get("X-A2A-Notification-Token"), string(t.ID), string(t.Status.State)})
		r.mu.Unlock()
	})}
	go func(s *http.Server) { _ = s.Serve(ln) }(r.srv)
}

func (r *stReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// of returns the states notified for task id, in arrival order.
func (r *stReceiver) of(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, n := range r.got {
		if n.taskID == id {
			out = append(out, n.state)
		}
	}
	return out
}

// waitFor waits until task id was notified in state st, and returns its
// notifications.
func (r *stReceiver) waitFor(id, st string) []string {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := r.of(id)
		for _, s := range got {
			if s == st {
				return got
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no %s notification for task %s; got %v", st, id, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// count is how many notifications of task id said st.
func stCount(states []string, st string) int {
	n := 0
	for _, s := range states {
		if s == st {
			n++
		}
	}
	return n
}
