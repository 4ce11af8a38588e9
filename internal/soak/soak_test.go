package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

func TestMain(m *testing.M) {
	code := m.Run()
	writproc.Cleanup()
	os.Exit(code)
}

// The workload's bounds: small enough that the store and the decision cache
// fill during the warm-up, so that what is judged afterwards is steady state
// (eviction churn included), not the filling of bounded structures.
const (
	maxTasks        = 1000
	maxTasksPerUser = 100
	decisionCache   = 2000
	callers         = 50
	maxInFlight     = 256
	followUpAge     = 10 * time.Second // follow-ups go to tasks younger than this (older ones may be evicted)
)

// TestSoak runs the soak for $SOAK (a duration; unset: skipped) at
// $SOAK_RATE requests per second (default 50) and writes soak.csv, soak.png
// and summary.md to $SOAK_OUT (default a temporary directory). See
// package doc and docs/soak-and-faults.md.
func TestSoak(t *testing.T) {
	if dir := os.Getenv("SOAK_RENDER"); dir != "" {
		render(t, dir)
		return
	}
	spec := os.Getenv("SOAK")
	if spec == "" {
		t.Skip("SOAK is unset: `make soak` runs it for 30 minutes, `SOAK=60s make soak` for one")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < time.Minute {
		t.Fatalf("SOAK=%q: want a duration of at least 60s (the first 30s are warm-up)", spec)
	}
	rate := 50.0
	if v := os.Getenv("SOAK_RATE"); v != "" {
		if rate, err = strconv.ParseFloat(v, 64); err != nil || rate <= 0 {
			t.Fatalf("SOAK_RATE=%q", v)
		}
	}
	out := os.Getenv("SOAK_OUT")
	if out == "" {
		out = t.TempDir()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	crit := Criteria{Warmup: max(30*time.Second, dur/10), Growth: 0.10, RSSSlackMiB: 4, GoroutineSlack: 10, FDSlack: 5,
		MaxStoreTasks: maxTasks, MinRateShare: 0.95, TargetRate: rate}

	env := newEnv(t, dur)
	l := &load{env: env, rng: rand.New(rand.NewPCG(1, 2)), last: map[string]taskAt{}, client: newClient()}
	// A few seconds of the load first, so that the idle baseline has writ's
	// pooled upstream connections too; the load's own connections are closed
	// before each count.
	warm, stopWarm := context.WithTimeout(context.Background(), 3*time.Second)
	l.generate(warm, rate)
	stopWarm()
	l.inflight.Wait()
	l.reset()
	l.client.CloseIdleConnections()
	time.Sleep(2 * time.Second)
	idleG, idleConns, err := env.proc.NonConnGoroutines()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("writ up (pid %d), idle after a warm-up burst: %d goroutines besides %d of HTTP connections; soak of %s at %.0f requests/s",
		env.proc.PID(), idleG, idleConns, dur, rate)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var reloads []float64
	var samples []Sample
	wg.Add(2)
	go func() { defer wg.Done(); reloads = env.reloadLoop(ctx, start) }()
	go func() { defer wg.Done(); samples = l.sampleLoop(ctx, start) }()
	l.generate(ctx, rate)
	l.inflight.Wait()
	wg.Wait()

	// After the load: writ's goroutines other than pooled connections' settle
	// back to where they were idle.
	l.client.CloseIdleConnections()
	settled, conns := idleG, 0
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if settled, conns, err = env.proc.NonConnGoroutines(); err != nil {
			t.Fatal(err)
		}
		if settled <= idleG || time.Now().After(deadline) {
			break
		}
	}
	sum := Judge(samples, l.all, crit)
	if settled > idleG {
		if _, prof, err := env.proc.Get("/debug/pprof/goroutine?debug=1"); err == nil {
			t.Logf("goroutines after the load:\n%s", prof)
		}
		sum.Failures = append(sum.Failures, fmt.Sprintf("goroutines did not settle after the load: %d besides connections', %d when idle before it", settled, idleG))
	}
	if !env.proc.Alive() {
		sum.Failures = append(sum.Failures, "writ exited during the soak")
	}
	report := fmt.Sprintf("# writ soak, %s at %.0f requests/s\n\nRun %s on %s. Mix: %s. Goroutines besides HTTP connections': %d idle before the load, %d after it (and %d of pooled connections).\n\n%s",
		dur, rate, start.UTC().Format("2006-01-02 15:04 MST"), hostNote(), mixNote(), idleG, settled, conns, sum.Markdown(crit, rate))
	if len(l.unexpected) > 0 {
		report += "\nUnexpected errors (first ones):\n\n"
		for _, e := range l.unexpected {
			report += "- " + e + "\n"
		}
	}
	write := func(name string, f func(io.Writer) error) {
		fh, err := os.Create(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if err := f(fh); err != nil {
			t.Fatal(err)
		}
	}
	write("soak.csv", func(w io.Writer) error { return WriteCSV(w, samples) })
	ts := make([]float64, len(samples))
	for i, s := range samples {
		ts[i] = s.T
	}
	title := fmt.Sprintf("writ soak: %s at %.0f req/s, %s", dur, rate, start.UTC().Format("2006-01-02"))
	write("soak.png", func(w io.Writer) error { return RenderPNG(w, title, ts, Panels(samples, reloads)) })
	write("summary.md", func(w io.Writer) error { _, err := io.WriteString(w, report); return err })
	t.Logf("soak written to %s\n%s", out, report)
	for _, f := range sum.Failures {
		t.Error(f)
	}
}

// render draws dir/soak.png again from dir/soak.csv (SOAK_RENDER=dir), for a
// run whose plot was drawn by an older renderer.
func render(t *testing.T, dir string) {
	f, err := os.Open(filepath.Join(dir, "soak.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, reloads, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]float64, len(samples))
	for i, s := range samples {
		ts[i] = s.T
	}
	title := os.Getenv("SOAK_TITLE")
	if title == "" {
		title = "writ soak"
	}
	out, err := os.Create(filepath.Join(dir, "soak.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := RenderPNG(out, title, ts, Panels(samples, reloads)); err != nil {
		t.Fatal(err)
	}
}

func hostNote() string {
	n := "this machine"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		n += " (load average " + strings.Join(strings.Fields(string(b))[:3], " ") + " at the end, other work included)"
	}
	return n
}

// env is writ and what it fronts.
type env struct {
	t          *testing.T
	dir        string
	proc       *writproc.Proc
	policies   string
	tokens     []string // callers allowed to delegate
	outsider   string   // another tenant: TENANT_NOT_PERMITTED
	noScope    string   // no delegate scope: SCOPE_MISSING
	rcv        *httptest.Server
	pushed     atomic.Int64
	reloadTick time.Duration
}

func newEnv(t *testing.T, dur time.Duration) *env {
	dir := t.TempDir()
	e := &env{t: t, dir: dir, reloadTick: 15 * time.Second}
	sanctions, err := seedagents.StartSanctions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sanctions.Close() })
	clarifier, err := seedagents.StartClarifier()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clarifier.Close() })
	e.rcv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		e.pushed.Add(1)
	}))
	t.Cleanup(e.rcv.Close)
	idp, err := devidp.New(dir, "https://idp.soak.test", "writ")
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(dur + time.Hour)
	tok := func(c devidp.Caller) string {
		c.Expires = exp
		s, err := idp.Token(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := range callers {
		e.tokens = append(e.tokens, tok(devidp.Caller{Agent: fmt.Sprintf("soak-%02d", i), User: "u", Tenant: "wholesale",
			Classification: "internal", Scope: "delegate", Chain: []string{"orchestrator"}}))
	}
	e.outsider = tok(devidp.Caller{Agent: "corp-bot", User: "u", Tenant: "corporate", Classification: "internal", Scope: "delegate"})
	e.noScope = tok(devidp.Caller{Agent: "reader", User: "u", Tenant: "wholesale", Classification: "internal", Scope: "read"})
	e.policies = writproc.CopyPolicies(t, filepath.Join(dir, "policies"), "127.0.0.1")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: ['%s']
decision_cache_size: %d
admin_pprof: true
decision_log: {output: '%s', max_size_mb: 20, max_backups: 1}
lifecycle: {max_tasks: %d, max_tasks_per_owner: %d}
identity:
  jwt: [{issuer: 'https://idp.soak.test', audiences: [writ], jwks_file: '%s'}]
push: {trusted_hosts: [127.0.0.1]}
%sagents:
  - {name: sanctions-screening-agent, route: /, upstream: '%s', protocol: a2a, owner: compliance,
     tenants: [wholesale], max_data_classification: restricted, security_schemes: [oauth2],
     skills: [{id: screen, tags: [sanctions]}]}
  - {name: sanctions-clarifier, route: /clarifier, upstream: '%s', protocol: a2a, owner: compliance,
     tenants: [wholesale], max_data_classification: restricted, security_schemes: [oauth2]}
`, e.policies, decisionCache, filepath.Join(dir, "decisions.jsonl"), maxTasks, maxTasksPerUser, idp.JWKSFile,
		writproc.StoreSection(dir), sanctions.URL, clarifier.URL)
	e.proc = writproc.Start(t, writproc.Binary(t), yaml, writproc.Options{Dir: dir})
	return e
}

// reloadLoop changes the policy data and lets the file watcher reload it,
// then sends SIGHUP, alternately, every reloadTick; it returns the times.
func (e *env) reloadLoop(ctx context.Context, start time.Time) []float64 {
	var at []float64
	tick := time.NewTicker(e.reloadTick)
	defer tick.Stop()
	data := filepath.Join(e.policies, "data.json")
	orig, err := os.ReadFile(data)
	if err != nil {
		e.t.Error(err)
		return nil
	}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return at
		case <-tick.C:
		}
		if n%2 == 1 {
			var doc map[string]any
			_ = json.Unmarshal(orig, &doc)
			doc["soak_reload"] = n // a new revision: the decision cache starts over
			b, _ := json.MarshalIndent(doc, "", "  ")
			if err := os.WriteFile(data, b, 0o644); err != nil {
				e.t.Error(err)
			}
		} else if err := e.proc.Signal(syscall.SIGHUP); err != nil {
			e.t.Error(err)
		}
		at = append(at, time.Since(start).Seconds())
	}
}

// taskAt is a caller's latest finished task.
type taskAt struct {
	id string
	at time.Time
}

// load generates the workload and keeps its counters.
type load struct {
	env      *env
	rng      *rand.Rand
	inflight sync.WaitGroup
	nIn      atomic.Int64

	client *http.Client

	mu         sync.Mutex
	last       map[string]taskAt
	lat        []float64 // this second's latencies, ms
	all        []float64 // the run's latencies, ms
	answered   int
	expected   int
	unexpErr   int
	unexpected []string // the first ones, for the report
}

// kinds of request and their weights (per 100 requests).
type kind struct {
	name   string
	weight int
}

var mix = []kind{{"send", 30}, {"stream", 20}, {"get", 10}, {"clarify", 10}, {"push", 10},
	{"cancel-finished", 5}, {"deny-tenant", 10}, {"deny-scope", 5}}

func mixNote() string {
	var parts []string
	for _, k := range mix {
		parts = append(parts, fmt.Sprintf("%s %d%%", k.name, k.weight))
	}
	return strings.Join(parts, ", ") + " (clarify is two requests: a send answered input-required and the reply on its task); a policy reload every 15 s, alternately by a data.json change (the file watcher) and by SIGHUP"
}

func (l *load) pick() string {
	n := l.rng.IntN(100)
	for _, k := range mix {
		if n < k.weight {
			return k.name
		}
		n -= k.weight
	}
	return mix[0].name
}

// generate starts requests at a fixed rate (open loop) until ctx ends.
func (l *load) generate(ctx context.Context, rate float64) {
	client := l.client
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for {
		next = next.Add(interval)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		if l.nIn.Load() >= maxInFlight {
			l.fail("the generator hit its in-flight cap: writ is not keeping up")
			continue
		}
		k := l.pick()
		caller := l.rng.IntN(callers)
		l.inflight.Add(1)
		l.nIn.Add(1)
		go func() {
			defer l.inflight.Done()
			defer l.nIn.Add(-1)
			l.run(client, k, caller)
		}()
	}
}

func newClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: maxInFlight, MaxConnsPerHost: maxInFlight}}
}

// reset forgets what the warm-up counted (its errors stay counted: a
// warm-up error is still an error).
func (l *load) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lat, l.all, l.answered, l.expected = nil, nil, 0, 0
}

func (l *load) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpErr++
	if len(l.unexpected) < 20 {
		l.unexpected = append(l.unexpected, time.Now().UTC().Format("15:04:05")+" "+msg)
	}
}

// done records one answered request.
func (l *load) done(started time.Time, expectedRefusal bool, err error) {
	ms := float64(time.Since(started).Microseconds()) / 1000
	l.mu.Lock()
	l.lat = append(l.lat, ms)
	l.all = append(l.all, ms)
	l.answered++
	if expectedRefusal && err == nil {
		l.expected++
	}
	l.mu.Unlock()
	if err != nil {
		l.fail(err.Error())
	}
}

func (l *load) recent(caller string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.last[caller]
	return t.id, ok && time.Since(t.at) < followUpAge
}

func (l *load) remember(caller, id string) {
	l.mu.Lock()
	l.last[caller] = taskAt{id, time.Now()}
	l.mu.Unlock()
}

func (l *load) run(c *http.Client, k string, idx int) {
	e := l.env
	tok, who := e.tokens[idx], strconv.Itoa(idx)
	msg := func(text, taskID string) map[string]any {
		m := map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", rand.Int64()), "role": "user",
			"parts": []any{map[string]any{"kind": "text", "text": text}, map[string]any{"kind": "data", "data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}
		if taskID != "" {
			m["taskId"] = taskID
		}
		return m
	}
	send := func(path, token string, params map[string]any, wantState string) (string, error) {
		start := time.Now()
		st, body, err := rpc(c, e.proc.URL+path, token, "message/send", params)
		if err == nil {
			var id, state string
			id, state, err = resultState(st, body)
			if err == nil && state != wantState {
				err = fmt.Errorf("message/send: state %q, want %q", state, wantState)
			}
			l.done(start, false, err)
			return id, err
		}
		l.done(start, false, err)
		return "", err
	}
	if k == "get" || k == "cancel-finished" {
		if _, ok := l.recent(who); !ok {
			k = "send" // no recent task to follow up: make one
		}
	}
	switch k {
	case "send":
		if id, err := send("/", tok, map[string]any{"message": msg("Screen the beneficiary", "")}, "completed"); err == nil {
			l.remember(who, id)
		}
	case "push":
		_, _ = send("/", tok, map[string]any{"message": msg("Screen with a callback", ""), "configuration": map[string]any{
			"pushNotificationConfig": map[string]any{"url": e.rcv.URL + "/cb", "token": "soak-" + who}}}, "completed")
	case "clarify":
		if id, err := send("/clarifier/", tok, map[string]any{"message": msg("Screen this entity", "")}, "input-required"); err == nil {
			_, _ = send("/clarifier/", tok, map[string]any{"message": msg("UAE and UN lists", id)}, "completed")
		}
	case "stream":
		start := time.Now()
		st, body, err := rpc(c, e.proc.URL+"/", tok, "message/stream", map[string]any{"message": msg("Screen the beneficiary", "")})
		if err == nil {
			err = streamCompleted(st, body)
		}
		l.done(start, false, err)
	case "get":
		id, _ := l.recent(who)
		start := time.Now()
		st, body, err := rpc(c, e.proc.URL+"/", tok, "tasks/get", map[string]any{"id": id})
		if err == nil {
			var state string
			if _, state, err = resultState(st, body); err == nil && state != "completed" {
				err = fmt.Errorf("tasks/get %s: state %q", id, state)
			}
		}
		l.done(start, false, err)
	case "cancel-finished":
		id, _ := l.recent(who)
		start := time.Now()
		st, body, err := rpc(c, e.proc.URL+"/", tok, "tasks/cancel", map[string]any{"id": id})
		if err == nil && (st != http.StatusOK || !bytes.Contains(body, []byte(`"code":-32002`))) {
			err = fmt.Errorf("tasks/cancel of a finished task: HTTP %d %.200s", st, body)
		}
		l.done(start, true, err)
	case "deny-tenant", "deny-scope":
		token, code := e.outsider, "TENANT_NOT_PERMITTED"
		if k == "deny-scope" {
			token, code = e.noScope, "SCOPE_MISSING"
		}
		start := time.Now()
		st, body, err := rpc(c, e.proc.URL+"/", token, "message/send", map[string]any{"message": msg("Screen", "")})
		if err == nil && (st != http.StatusForbidden || !bytes.Contains(body, []byte(code))) {
			err = fmt.Errorf("%s: HTTP %d %.200s", k, st, body)
		}
		l.done(start, true, err)
	}
}

// rpc posts one A2A 0.3 JSON-RPC request and returns the status and the body.
func rpc(c *http.Client, url, token, method string, params any) (int, []byte, error) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, body, fmt.Errorf("%s: reading the answer: %w", method, err)
	}
	return resp.StatusCode, body, nil
}

// resultState reads a 0.3 task result.
func resultState(st int, body []byte) (id, state string, err error) {
	var r struct {
		Result *struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Result == nil {
		return "", "", fmt.Errorf("HTTP %d %.200s", st, body)
	}
	return r.Result.ID, r.Result.Status.State, nil
}

// streamCompleted checks an SSE answer ends with the task completed.
func streamCompleted(st int, body []byte) error {
	if st != http.StatusOK {
		return fmt.Errorf("message/stream: HTTP %d %.200s", st, body)
	}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var ev struct {
			Result struct {
				Status struct {
					State string `json:"state"`
				} `json:"status"`
			} `json:"result"`
			Error any `json:"error"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(d)), &ev) != nil || ev.Error != nil {
			return fmt.Errorf("message/stream: event %.200s", d)
		}
		if s := ev.Result.Status.State; s != "" {
			last = s
		}
	}
	if last != "completed" {
		return fmt.Errorf("message/stream: last state %q", last)
	}
	return nil
}

// sampleLoop records one Sample per second until ctx ends.
func (l *load) sampleLoop(ctx context.Context, start time.Time) []Sample {
	var out []Sample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	p := l.env.proc
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		l.mu.Lock()
		lat := l.lat
		l.lat = nil
		s := Sample{T: time.Since(start).Seconds(), Requests: l.answered, Expected: l.expected, Unexpected: l.unexpErr}
		l.answered, l.expected, l.unexpErr = 0, 0, 0
		l.mu.Unlock()
		slices.Sort(lat)
		s.P50, s.P99, s.P999 = Percentile(lat, 50), Percentile(lat, 99), Percentile(lat, 99.9)
		s.InFlight = int(l.nIn.Load())
		if rss, err := p.RSS(); err == nil {
			s.RSSMiB = float64(rss) / (1 << 20)
		}
		if n, err := p.OpenFiles(); err == nil {
			s.FDs = n
		}
		if fi, err := os.Stat(filepath.Join(l.env.dir, "writ.db")); err == nil {
			s.StoreMiB = float64(fi.Size()) / (1 << 20)
		}
		if m, err := p.Metrics(); err == nil {
			s.Goroutines = int(m["go_goroutines"])
			s.StoreTasks = int(m.Sum("writ_tasks"))
			s.Pushed = int(m.Sum("writ_push_deliveries_total", `result="delivered"`))
			s.Reloads = int(m.Sum("writ_policy_reloads_total"))
		} else {
			l.fail("scraping /metrics: " + err.Error())
		}
		out = append(out, s)
	}
}
