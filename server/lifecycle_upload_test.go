package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/seedagents"
)

// The secrets of the push config in the lifecycle upload test: none may
// leave the host.
var pushSecrets = []string{"s3cret-path", "s3cret-query", "s3cret-token", "s3cret-cred"}

// pushPolicies is a copy of the shipped policies with 127.0.0.1 (the
// test's receiver) on the wholesale tenant's callback allow-list, over
// http: trusted in this test only.
func pushPolicies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, pat := range []string{"policies/*.rego", "policies/data.json"} {
		files, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(f) == "data.json" {
				s := strings.Replace(string(raw), `"wholesale": ["agents.bank.ae"]`, `"wholesale": ["agents.bank.ae", "127.0.0.1"]`, 1)
				raw = []byte(strings.Replace(s, `"allow_http_hosts": []`, `"allow_http_hosts": ["127.0.0.1"]`, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), raw, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// pushReceiver counts the notifications it received.
type pushReceiver struct {
	url string
	mu  sync.Mutex
	n   int
}

func newPushReceiver(t *testing.T) *pushReceiver {
	t.Helper()
	r := &pushReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "http://" + ln.Addr().String()
	return r
}

func (r *pushReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// brokenAgent answers every request with a JSON-RPC error.
func brokenAgent(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"screening backend down"}}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// lifecycleWrit is a writ in front of the seed's clarifier (at /: the
// first message asks for input, the reply completes the task), its
// sanctions agent (at /screen: a task completed with an artifact) and a
// broken agent (at /broken), delivering push, logging to a file and
// shipping to col.
func lifecycleWrit(t *testing.T, col *collector, mutate func(*config.DecisionUpload)) (*Server, string) {
	t.Helper()
	clar, err := seedagents.StartClarifier()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clar.Close() })
	sanctions, err := seedagents.StartSanctions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sanctions.Close() })
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	cfg := uploadConfig(t, col.url, func(u *config.DecisionUpload) {
		if mutate != nil {
			mutate(u)
		}
	})
	cfg.Policies = []string{pushPolicies(t)}
	cfg.Agents[0].Upstream = clar.URL
	screen, broken := cfg.Agents[0], cfg.Agents[0]
	screen.Name, screen.Route, screen.Upstream = "screening-b", "/screen", sanctions.URL
	broken.Name, broken.Route, broken.Upstream = "screening-replica", "/broken", brokenAgent(t)
	cfg.Agents = append(cfg.Agents, screen, broken)
	cfg.Push.Disabled, cfg.Push.TrustedHosts, cfg.Push.MaxAttempts = false, []string{"127.0.0.1"}, 1
	cfg.DecisionLog.Output = logPath
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(t.Context(), cfg, WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	return s, logPath
}

// rpc sends a 0.3 message/send through s at path with the bench token and
// returns the answer.
func rpc(t *testing.T, s *Server, path string, params map[string]any) map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+benchToken(t))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatal(err)
	}
	return ans
}

// message is a 0.3 user message with text, extra fields added.
func message(id, text string, extra map[string]any) map[string]any {
	m := map[string]any{"kind": "message", "messageId": id, "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// lifecycleSequence runs the sequence: a send with a push config (the
// task is created, asks for input, a notification is delivered), the
// reply (it completes, another notification), a send to the sanctions
// agent (a task completed with an artifact), a send the agent answers with
// an error. It returns the first task's id.
func lifecycleSequence(t *testing.T, s *Server, rcv *pushReceiver) string {
	t.Helper()
	ans := rpc(t, s, "/", map[string]any{"message": message("m-1", "Screen Acme Trading FZE", nil),
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{
			"url": rcv.url + "/cb/s3cret-path?sig=s3cret-query", "token": "s3cret-token",
			"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "s3cret-cred"}}}})
	res, _ := ans["result"].(map[string]any)
	id, _ := res["id"].(string)
	if id == "" {
		t.Fatalf("send: %v", ans)
	}
	ans = rpc(t, s, "/", map[string]any{"message": message("m-2", "UAE and UN lists", map[string]any{"taskId": id})})
	if res, _ := ans["result"].(map[string]any); res == nil {
		t.Fatalf("reply: %v", ans)
	}
	if ans = rpc(t, s, "/screen", map[string]any{"message": message("m-3", "Screen Gamma Ltd", nil)}); ans["result"] == nil {
		t.Fatalf("the sanctions agent's answer: %v", ans)
	}
	if ans = rpc(t, s, "/broken", map[string]any{"message": message("m-4", "Screen Beta LLC", nil)}); ans["error"] == nil {
		t.Fatalf("the broken agent's answer: %v", ans)
	}
	return id
}

// localLines reads every line of the decision log file.
func localLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a line that is not JSON: %s", line)
		}
		out = append(out, m)
	}
	return out
}

// lifecycleTypes are the lines of the local log that are lifecycle lines.
var lifecycleTypes = map[string]bool{"task_created": true, "task_state_changed": true, "task_artifact": true,
	"task_protocol_violation": true, "task_evicted": true, "upstream_error": true,
	"push_attempt": true, "push_delivered": true, "push_failed": true}

// canonical is v's JSON (map keys sorted).
func canonical(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestUploadShipsLifecycle: with decision_log.upload, every lifecycle line
// the local log writes in a real request sequence (a task created, its
// state changed, its artifact, each push attempt and its result, the
// agent's error) reaches the collector exactly once as an OPA event of its
// own: a decision_id no other event has, path writ/lifecycle/<type>, the
// time and what the local line says as its input, the decision that
// caused it in custom, the decisions' labels; and no byte of the push
// config's URL path, query, token or credentials is in any upload.
//
// Threat: the lifecycle shipped upstream carries what the local log
// withholds (a callback URL with its signature in the query, a token),
// leaking it to every reader of the collector; or shares its decision's
// id, so a pipeline keyed on decision_id drops the decision or the
// lifecycle event as a duplicate. Defence: a lifecycle event is the local
// line's own encoding (decisionlog's, with its redaction: the receiver's
// host only), under an id of its own, the decision's id in custom.
func TestUploadShipsLifecycle(t *testing.T) {
	col := newCollector(t)
	rcv := newPushReceiver(t)
	s, logPath := lifecycleWrit(t, col, nil)
	taskID := lifecycleSequence(t, s, rcv)
	waitFor(t, "two notifications", func() bool { return rcv.count() >= 2 })
	waitFor(t, "the push outcomes in the local log", func() bool {
		n := 0
		for _, l := range localLines(t, logPath) {
			if l["type"] == "push_delivered" {
				n++
			}
		}
		return n >= 2
	})
	shutdown(t, s) // the local log and the upload flush

	// What the local log says: each lifecycle line's facts, by type and
	// time (time and type are the event's timestamp and path).
	want := map[string]int{}
	types := map[string]int{}
	for _, l := range localLines(t, logPath) {
		typ, _ := l["type"].(string)
		if !lifecycleTypes[typ] {
			continue
		}
		types[typ]++
		cause, _ := l["decision_id"].(string)
		facts := map[string]any{}
		for k, v := range l {
			switch k {
			case "time", "type", "decision_id", "seq", "prev":
			default:
				facts[k] = v
			}
		}
		want[typ+" "+l["time"].(string)+" "+cause+" "+canonical(t, facts)]++
	}
	for _, typ := range []string{"task_created", "task_state_changed", "task_artifact", "push_attempt", "push_delivered", "upstream_error"} {
		if types[typ] == 0 {
			t.Fatalf("the sequence wrote no %s line (%v): the test does not cover it", typ, types)
		}
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	ids := map[string]int{}
	var labels string
	got := map[string]int{}
	for _, ev := range col.evs {
		id, _ := ev["decision_id"].(string)
		ids[id]++
		path, _ := ev["path"].(string)
		if path == "writ/authz/decision" {
			if labels == "" {
				labels = canonical(t, ev["labels"])
			}
			continue
		}
		typ, ok := strings.CutPrefix(path, "writ/lifecycle/")
		if !ok || !lifecycleTypes[typ] {
			t.Errorf("an event at path %q", path)
			continue
		}
		custom, _ := ev["custom"].(map[string]any)
		cause, _ := custom["caused_by_decision_id"].(string)
		ts, _ := ev["timestamp"].(string)
		key := typ + " " + ts + " " + cause + " " + canonical(t, ev["input"])
		got[key]++
		if ev["result"] != nil {
			t.Errorf("a lifecycle event with a result: %v", ev)
		}
		if l := canonical(t, ev["labels"]); labels != "" && l != labels {
			t.Errorf("lifecycle labels %s, decisions' %s", l, labels)
		}
	}
	for id, n := range ids {
		if id == "" || n != 1 {
			t.Errorf("decision_id %q on %d events", id, n)
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("local line %s: %d in the log, %d uploaded", k, n, got[k])
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("uploaded %s (%d times): no such line in the local log", k, n)
		}
	}
	var causes int
	for k := range got {
		if strings.HasPrefix(k, "task_created ") && !strings.Contains(k, "  ") {
			causes++ // a created task names the decision that let it in
		}
	}
	if causes == 0 {
		t.Errorf("no task_created event names its decision in custom: %v", got)
	}
	all := canonical(t, col.evs)
	if !strings.Contains(all, taskID) {
		t.Fatalf("the task %s is in no upload", taskID)
	}
	for _, secret := range pushSecrets {
		if strings.Contains(all, secret) {
			t.Errorf("an upload holds %q", secret)
		}
	}
	if tok := benchToken(t); strings.Contains(all, tok[strings.LastIndex(tok, ".")+1:]) {
		t.Error("an upload holds the caller's token")
	}
}

// TestUploadLifecycleOff: with decision_log.upload.lifecycle false the
// decisions are shipped and no lifecycle line is.
func TestUploadLifecycleOff(t *testing.T) {
	col := newCollector(t)
	rcv := newPushReceiver(t)
	s, logPath := lifecycleWrit(t, col, func(u *config.DecisionUpload) { off := false; u.Lifecycle = &off })
	lifecycleSequence(t, s, rcv)
	waitFor(t, "two notifications", func() bool { return rcv.count() >= 2 })
	shutdown(t, s)
	var decisions, lifecycle int
	for _, l := range localLines(t, logPath) {
		switch {
		case l["type"] == "decision":
			decisions++
		case lifecycleTypes[l["type"].(string)]:
			lifecycle++
		}
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	shipped := 0
	for _, ev := range col.evs {
		if ev["path"] != "writ/authz/decision" {
			t.Errorf("shipped with lifecycle off: %v", ev)
		}
		shipped++
	}
	if lifecycle == 0 || decisions == 0 || shipped != decisions {
		t.Errorf("%d decisions and %d lifecycle lines logged, %d decisions shipped", decisions, lifecycle, shipped)
	}
}
