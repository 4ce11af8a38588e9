// Package writproc runs the built `writ serve` binary as a child process for
// tests that want the real thing (the interop matrix, the soak, the fault
// tests): it builds the binary once per test process (or takes WRIT_BIN),
// starts it on a configuration, finds its listeners in its log, and reads
// what an operator would read: the admin API, /metrics, /proc and the
// decision log. Never on the serving path.
package writproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/leakcheck"
)

const (
	modulePath   = "github.com/writ-authz/writ"
	readyTimeout = 60 * time.Second
	stopTimeout  = 40 * time.Second // writ drains for 30s on SIGTERM
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildDir  string
)

// Binary returns the path of a writ binary built from this tree: $WRIT_BIN
// when set (make builds it once for every package), else `go build
// ./cmd/writ` once per test process into a temporary directory (removed by
// Cleanup, which a TestMain may call).
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("WRIT_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	buildOnce.Do(func() { buildPath, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("writproc: %v", buildErr)
	}
	return buildPath
}

// Cleanup removes the binary Binary built, if any.
func Cleanup() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

func build() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if buildDir, err = os.MkdirTemp("", "writ-bin-"); err != nil {
		return "", err
	}
	out := filepath.Join(buildDir, "writ")
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, "./cmd/writ") //nolint:gosec // the Go toolchain ($GO, as make passes it), in a test helper
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/writ: %w\n%s", err, b)
	}
	return out, nil
}

// RepoRoot walks up from the working directory to writ's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && moduleLine(b) == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// moduleLine is the module path a go.mod declares, "" when it declares none.
func moduleLine(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// FreeAddr returns a 127.0.0.1 address that was free a moment ago, for a
// listener whose address must be known before it starts (a public_url).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// StoreSection is the `store:` block that keeps a writ's lifecycle under
// dir when this tree's configuration has one (the file store by default,
// which must not be shared by two processes), and "" before it does. Tests
// append it to their configurations so they run unchanged on either side of
// the store wiring.
func StoreSection(dir string) string {
	if !HasConfigKey("store") {
		return ""
	}
	return fmt.Sprintf("store: {kind: file, path: '%s'}\n", filepath.Join(dir, "writ.db"))
}

// HasConfigKey reports whether writ's configuration has a top-level key.
func HasConfigKey(key string) bool {
	t := reflect.TypeOf(config.Config{})
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
			return true
		}
	}
	return false
}

// Proc is a running `writ serve` (or `writ sts`: StartSTS).
type Proc struct {
	t   testing.TB
	cmd *exec.Cmd
	// Dir holds its configuration (writ.yaml) and whatever the test puts there.
	Dir string
	// URL is the sidecar's base URL, AdminURL the admin API's, GRPCAddr the
	// ext_authz gRPC listener's, ExtProcAddr the ext_proc listener's and
	// EgressURL the egress listener's base URL (empty unless configured).
	URL, AdminURL, GRPCAddr, ExtProcAddr, EgressURL string
	// DecisionLog is the decision log's path when the config names one.
	DecisionLog string

	log    *logBuffer
	exited chan struct{}
	err    error
	once   sync.Once
}

// Options adjust Start.
type Options struct {
	// Dir is where writ.yaml is written (default t.TempDir()).
	Dir string
	// Args are extra `writ serve` flags.
	Args []string
	// DecisionLog is the decision log's path, when the config writes one
	// (the config must name it itself; this only tells the Proc where it is).
	DecisionLog string
	// Command, when set, builds the process from writ's arguments ("serve",
	// "-config", path, ...) instead of running bin with them: a test binary
	// that re-executes itself as writ (cmd/writ's tests) passes its own.
	Command func(args []string) *exec.Cmd
}

// Start writes yaml to Dir/writ.yaml, runs `writ serve -config` on it and
// waits until it logs "writ is serving". A cleanup stops it (SIGTERM, then
// SIGKILL after the drain deadline); it also dies with the test process.
func Start(t testing.TB, bin, yaml string, o Options) *Proc {
	t.Helper()
	p := start(t, bin, "serve", "writ.yaml", yaml, "writ is serving", o)
	line, _ := p.log.find("writ is serving")
	var l struct {
		Listen string `json:"listen"`
		Admin  string `json:"admin"`
	}
	_ = json.Unmarshal([]byte(line), &l)
	p.URL, p.AdminURL = "http://"+l.Listen, "http://"+l.Admin
	if line, ok := p.log.find("Envoy mode: ext_authz is serving"); ok {
		var e struct {
			GRPC string `json:"grpc"`
		}
		_ = json.Unmarshal([]byte(line), &e)
		p.GRPCAddr = e.GRPC
	}
	if line, ok := p.log.find("egress is serving"); ok {
		var e struct {
			Addr string `json:"addr"`
		}
		_ = json.Unmarshal([]byte(line), &e)
		p.EgressURL = "http://" + e.Addr
	}
	if line, ok := p.log.find("Envoy mode: ext_proc is serving"); ok {
		var e struct {
			Addr string `json:"addr"`
		}
		_ = json.Unmarshal([]byte(line), &e)
		p.ExtProcAddr = e.Addr
	}
	return p
}

// StartSTS writes yaml to Dir/sts.yaml, runs `writ sts -config` on it and
// waits until it serves; the Proc's URL is then the STS's issuer. It is
// stopped like a writ serve.
func StartSTS(t testing.TB, bin, yaml string, o Options) *Proc {
	t.Helper()
	const ready = "writ sts is serving"
	p := start(t, bin, "sts", "sts.yaml", yaml, ready, o)
	line, _ := p.log.find(ready)
	var l struct {
		Issuer string `json:"issuer"`
	}
	_ = json.Unmarshal([]byte(line), &l)
	p.URL = l.Issuer
	return p
}

// start writes yaml to Dir/file, runs `writ <command> -config` on it and
// waits until it logs ready.
func start(t testing.TB, bin, command, file, yaml, ready string, o Options) *Proc {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	path := filepath.Join(o.Dir, file)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, Dir: o.Dir, DecisionLog: o.DecisionLog, log: newLogBuffer(4 << 20), exited: make(chan struct{})}
	args := append([]string{command, "-config", path}, o.Args...)
	if o.Command != nil {
		p.cmd = o.Command(args)
	} else {
		p.cmd = exec.Command(bin, args...)
	}
	p.cmd.Dir = o.Dir
	p.cmd.Stdout = io.Discard
	p.cmd.Stderr = p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start writ %s: %v", command, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("writ %s log (tail):\n%s", command, p.log.tail(16<<10))
		}
	})
	deadline := time.After(readyTimeout)
	for {
		if _, ok := p.log.find(ready); ok {
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("writ %s exited before serving: %v\n%s", command, p.err, p.log.tail(16<<10))
		case <-deadline:
			_ = p.Stop()
			t.Fatalf("writ %s did not log %q within %s\n%s", command, ready, readyTimeout, p.log.tail(16<<10))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// PID is the child's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Alive reports whether the process still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed when the process ends.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits for the drain; SIGKILL after stopTimeout.
// It returns the exit error (nil for a clean exit).
func (p *Proc) Stop() error {
	p.once.Do(func() {
		if p.Alive() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p.err
}

// Log returns the log lines kept so far (JSON, one per line).
func (p *Proc) Log() string { return p.log.String() }

// LogLines returns the kept log lines whose msg contains s.
func (p *Proc) LogLines(s string) []string { return p.log.all(s) }

// Get fetches an admin path and returns the status and body.
func (p *Proc) Get(path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.AdminURL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// PolicyInfo is GET /v1/policy, the parts tests read.
type PolicyInfo struct {
	Revision   string `json:"revision"`
	LastReload *struct {
		OK       bool   `json:"ok"`
		Revision string `json:"revision"`
		Error    string `json:"error"`
	} `json:"last_reload"`
	Reloads *struct {
		OK     uint64 `json:"ok"`
		Failed uint64 `json:"failed"`
	} `json:"reloads"`
}

// Policy reads GET /v1/policy.
func (p *Proc) Policy() (PolicyInfo, error) {
	var pi PolicyInfo
	code, b, err := p.Get("/v1/policy")
	if err != nil {
		return pi, err
	}
	if code != http.StatusOK {
		return pi, fmt.Errorf("/v1/policy: %d %s", code, b)
	}
	return pi, json.Unmarshal(b, &pi)
}

// Metrics scrapes /metrics.
func (p *Proc) Metrics() (Metrics, error) {
	code, b, err := p.Get("/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d", code)
	}
	return ParseMetrics(b), nil
}

// Metrics are Prometheus samples keyed by `name{labels}` as exposed.
type Metrics map[string]float64

// ParseMetrics reads the Prometheus text format (comments skipped).
func ParseMetrics(b []byte) Metrics {
	m := Metrics{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m
}

// Sum adds every sample of a metric whose labels contain each of the given
// `k="v"` pairs.
func (m Metrics) Sum(name string, labels ...string) float64 {
	var s float64
	for k, v := range m {
		base, rest, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			s += v
		}
	}
	return s
}

// Goroutines is go_goroutines from /metrics.
func (p *Proc) Goroutines() (int, error) {
	m, err := p.Metrics()
	if err != nil {
		return 0, err
	}
	v, ok := m["go_goroutines"]
	if !ok {
		return 0, errors.New("no go_goroutines in /metrics")
	}
	return int(v), nil
}

// SettledGoroutines waits until the goroutine count is at most want (plus
// slack) or the deadline passes, and returns the last count: a leak check
// that allows for connections and timers still winding down.
func (p *Proc) SettledGoroutines(want, slack int, within time.Duration) (int, error) {
	deadline := time.Now().Add(within)
	for {
		n, err := p.Goroutines()
		if err != nil {
			return n, err
		}
		if n <= want+slack || time.Now().After(deadline) {
			return n, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RSS is the resident set size in bytes, from /proc/<pid>/status.
func (p *Proc) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, errors.New("no VmRSS")
}

// OpenFiles counts /proc/<pid>/fd.
func (p *Proc) OpenFiles() (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.PID()))
	return len(ents), err
}

// Line is one decision-log line, the fields the tests read.
type Line struct {
	Type      string `json:"type"`
	Mode      string `json:"mode"`
	Route     string `json:"route"`
	Operation string `json:"operation"`
	Protocol  string `json:"protocol"`
	Caller    *struct {
		AgentID string `json:"agent_id"`
		Tenant  string `json:"tenant"`
	} `json:"caller"`
	TaskID  string `json:"task_id"`
	Allow   bool   `json:"allow"`
	Refused string `json:"refused"`
	Denials []struct {
		Code string `json:"code"`
	} `json:"denials"`
	From string `json:"from"`
	To   string `json:"to"`
	Push *struct {
		Host      string `json:"host"`
		Delivered bool   `json:"delivered"`
	} `json:"push"`
}

// AgentID is the caller's agent id, "" without a caller.
func (l Line) AgentID() string {
	if l.Caller == nil {
		return ""
	}
	return l.Caller.AgentID
}

// DecisionLines reads the decision log file.
func (p *Proc) DecisionLines() ([]Line, error) {
	if p.DecisionLog == "" {
		return nil, errors.New("no decision log path")
	}
	return ReadDecisionLog(p.DecisionLog)
}

// ReadDecisionLog reads a decision log file (a half-written last line is
// skipped).
func ReadDecisionLog(path string) ([]Line, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Line
	for raw := range bytes.SplitSeq(b, []byte("\n")) {
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var l Line
		if json.Unmarshal(raw, &l) == nil {
			out = append(out, l)
		}
	}
	return out, nil
}

// logBuffer keeps the child's stderr, bounded.
type logBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

func newLogBuffer(limit int) *logBuffer { return &logBuffer{limit: limit} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		// Drop whole lines from the front.
		cut := over
		if i := bytes.IndexByte(b.buf[over:], '\n'); i >= 0 {
			cut = over + i + 1
		}
		b.buf = append(b.buf[:0:0], b.buf[cut:]...)
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func (b *logBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// find returns the first complete line containing s.
func (b *logBuffer) find(s string) (string, bool) {
	l := b.all(s)
	if len(l) == 0 {
		return "", false
	}
	return l[0], true
}

func (b *logBuffer) all(s string) []string {
	b.mu.Lock()
	data := string(b.buf)
	b.mu.Unlock()
	var out []string
	for line := range strings.SplitSeq(data, "\n") {
		if strings.Contains(line, s) && strings.HasSuffix(line, "}") {
			out = append(out, line)
		}
	}
	return out
}

// CopyPolicies copies the shipped policies (policies/*.rego and data.json)
// into dir, with each of hosts on the callback allow-list of the wholesale
// tenant and allowed over plain http: a copy for tests whose push receiver
// listens on loopback. It returns dir.
func CopyPolicies(t testing.TB, dir string, hosts ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "policies")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || (!strings.HasSuffix(name, ".rego") && name != "data.json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "data.json" && len(hosts) > 0 {
			if raw, err = allowCallbacks(raw, hosts); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil { //nolint:gosec // a copy of the shipped policies into the test's directory
			t.Fatal(err)
		}
	}
	return dir
}

func allowCallbacks(raw []byte, hosts []string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	get := func(m map[string]any, k string) map[string]any {
		v, _ := m[k].(map[string]any)
		if v == nil {
			v = map[string]any{}
			m[k] = v
		}
		return v
	}
	cb := get(get(get(doc, "writ"), "config"), "callbacks")
	tenants := get(cb, "tenants")
	add := func(list any) []any {
		l, _ := list.([]any)
		for _, h := range hosts {
			l = append(l, h)
		}
		return l
	}
	tenants["wholesale"] = add(tenants["wholesale"])
	cb["allow_http_hosts"] = add(cb["allow_http_hosts"])
	return json.MarshalIndent(doc, "", "  ")
}

// NonConnGoroutines counts writ's goroutines other than those of pooled and
// open HTTP connections (client readLoop/writeLoop, server conn.serve), from
// /debug/pprof/goroutine (the config must set admin_pprof: true). Idle
// keep-alive connections come and go with the pools' timeouts; everything
// else must return to where it was once the load stops.
func (p *Proc) NonConnGoroutines() (total, conns int, err error) {
	code, b, err := p.Get("/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, 0, err
	}
	if code != http.StatusOK {
		return 0, 0, fmt.Errorf("/debug/pprof/goroutine: %d (admin_pprof off?)", code)
	}
	total, conns = leakcheck.CountGoroutines(b)
	return total - conns, conns, nil
}
