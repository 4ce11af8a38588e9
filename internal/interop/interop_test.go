package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/peers"
	"github.com/writ-authz/writ/internal/writproc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	writproc.Cleanup()
	os.Exit(code)
}

// maxParallel bounds the cells running at once (each JS cell is a node
// process; the machine has two cores shared with the rest of the suite).
const maxParallel = 4

// TestInteropMatrix runs every client against every agent through every
// door, for every operation the pair can do, through the built `writ serve`:
// the SDK's own calls must succeed and return what the agent does, and
// writ's decision log must hold an allowed decision for each request (plus,
// where writ sees answers, the task's final state and the push delivery).
// With INTEROP_DOC=<path> it rewrites the marked block of that file with the
// table (make interop: docs/interop.md).
func TestInteropMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the interop matrix starts real agents and writ processes")
	}
	peers.EnsureNode(t)
	started := time.Now()
	w := newWorld(t)
	ds := doors()
	runs := make([]*running, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); runs[i] = d.start(t, w) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("world and %d doors up in %s", len(ds), time.Since(started).Round(time.Millisecond))

	var mu sync.Mutex
	var rows []Row
	sem := make(chan struct{}, maxParallel)
	t.Run("cells", func(t *testing.T) {
		for di, d := range ds {
			dr := runs[di]
			for _, client := range clientOrder {
				for _, agent := range agentOrder {
					row := Row{Door: d.name(), Client: client, Agent: agent, Cells: map[Op]Result{}}
					all, na := notApplicable(client, agent)
					if all != "" {
						for _, op := range Ops {
							row.Cells[op] = Result{Verdict: NA, Note: all}
						}
						mu.Lock()
						rows = append(rows, row)
						mu.Unlock()
						continue
					}
					var ops []Op
					for _, op := range Ops {
						switch {
						case dr.na[op] != "":
							row.Cells[op] = Result{Verdict: NA, Note: dr.na[op]}
						case na[op] != "":
							row.Cells[op] = Result{Verdict: NA, Note: na[op]}
						default:
							ops = append(ops, op)
						}
					}
					c := &cell{id: cellID(d.name(), client, agent), door: dr, client: client, agent: agent}
					t.Run(c.id, func(t *testing.T) {
						t.Parallel()
						sem <- struct{}{}
						defer func() { <-sem }()
						res := runCell(t, w, c, ops)
						for op, r := range res {
							row.Cells[op] = r
							if r.Verdict != Pass {
								t.Errorf("%s: %s", op, r.Note)
							}
						}
						mu.Lock()
						rows = append(rows, row)
						mu.Unlock()
					})
				}
			}
		}
	})

	SortRows(rows, doorOrder, clientOrder, agentOrder)
	m := Matrix{Date: time.Now(), Versions: versions(t), Rows: rows, Notes: []string{
		"Envoy ext_authz: the forwarder in internal/interop plays Envoy's router (ext_authz filter with the raw body and raw headers, a prefix route per agent); writ runs with `lifecycle.unknown_tasks: allow`, as an ext_authz-only deployment must for follow-ups, so listings there are the agent's own (unfiltered). Envoy ext_proc: proxy/extproc's test Envoy (`extproctest.Envoy`: the ext_proc filter with the request body buffered and the answer streamed, and a router) in front of writ's ext_proc listener.",
		"a2a-go against the JS agent: the 0.3 client cannot read the 1.0 card writ serves, so it is built from the 0.3 JSON-RPC endpoint that card lists (`a2aclient.NewFromEndpoints`); every call after that is the SDK's own.",
	}}
	pass, fail, na := m.Counts()
	t.Logf("interop matrix: %d pass, %d fail, %d N/A, in %s\n%s", pass, fail, na, time.Since(started).Round(time.Millisecond), m.Markdown())
	if path := os.Getenv("INTEROP_DOC"); path != "" {
		if err := RewriteBlock(path, m.Markdown()); err != nil {
			t.Fatalf("rewrite %s: %v", path, err)
		}
		t.Logf("rewrote the interop block of %s", path)
	}
}

// cellID is the cell's caller id: every task, listing and decision-log line
// of the cell is this caller's.
func cellID(door, client, agent string) string {
	short := map[string]string{"sidecar": "sc", "Envoy ext_authz (gRPC)": "xa", "Envoy ext_proc": "xp", clientJSRPC: "jsrpc", clientJSREST: "jsrest",
		clientGo: "go", clientHTTP: "http", agentJS: "js", agentGo: "goa", agentACP: "acp"}
	return "ix-" + short[door] + "-" + short[client] + "-" + short[agent]
}

// runCell runs the client's operations and checks each against writ's
// decision log.
func runCell(t *testing.T, w *world, c *cell, ops []Op) map[Op]Result {
	c.token = w.token(t, c.id)
	c.pushURL, c.pushToken = w.rcv.url(c.id), "tok-"+c.id
	c.fastPath, c.slowPath = "/js", "/js"
	switch c.agent {
	case agentGo:
		c.fastPath, c.slowPath = "/go", "/go-slow"
	case agentACP:
		c.fastPath, c.slowPath = "/acp", "/acp"
	}
	var outs map[Op]*outcome
	switch c.client {
	case clientJSRPC:
		outs = runJS(t, c, "jsonrpc", ops)
	case clientJSREST:
		outs = runJS(t, c, "rest", ops)
	case clientGo:
		outs = runGo(t, c, ops)
	case clientHTTP:
		outs = runPlain(c, ops)
	}
	return verify(w, c, ops, outs)
}

// decisionOps are the decision-log operations each matrix operation makes.
var decisionOps = map[Op][]string{
	Send: {"send"}, Stream: {"stream"}, Get: {"get"}, List: {"list"}, Cancel: {"cancel"}, Subscribe: {"subscribe"},
	Push: {"send", "push_config.set", "push_config.get", "push_config.list", "push_config.delete"},
}

// verify turns the client's outcomes into results: an operation passes when
// the client succeeded and writ's decision log shows it (waiting for the
// asynchronous log and push delivery).
func verify(w *world, c *cell, ops []Op, outs map[Op]*outcome) map[Op]Result {
	res := map[Op]Result{}
	pending := map[Op]bool{}
	for _, op := range ops {
		o := outs[op]
		switch {
		case o == nil:
			res[op] = Result{Verdict: Fail, Note: "not run"}
		case o.err != nil:
			res[op] = Result{Verdict: Fail, Note: "client: " + o.err.Error()}
		default:
			pending[op] = true
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	why := map[Op]string{}
	for len(pending) > 0 {
		lines, err := c.door.proc.DecisionLines()
		if err != nil {
			lines = nil
		}
		var mine []writproc.Line
		denied := ""
		for _, l := range lines {
			if l.AgentID() == c.id && l.Type == "decision" {
				mine = append(mine, l)
				if !l.Allow {
					denied = fmt.Sprintf("writ refused %s (%v %s)", l.Operation, l.Denials, l.Refused)
				}
			}
		}
		for op := range pending {
			o := outs[op]
			why[op] = ""
			for _, want := range decisionOps[op] {
				if !slices.ContainsFunc(mine, func(l writproc.Line) bool {
					return l.Operation == want && l.Allow && l.Mode == c.door.mode
				}) {
					why[op] = "no allowed " + want + " decision (mode " + c.door.mode + ") in the decision log"
				}
			}
			if denied != "" {
				why[op] = denied
			}
			if why[op] == "" && c.door.records && o.to != "" && !slices.ContainsFunc(lines, func(l writproc.Line) bool {
				return l.TaskID == o.taskID && l.To == o.to
			}) {
				why[op] = "the decision log has no change of task " + o.taskID + " to " + o.to
			}
			if why[op] == "" && op == Push && c.door.records {
				if !slices.ContainsFunc(lines, func(l writproc.Line) bool {
					return l.TaskID == o.taskID && l.Type == "push_delivered"
				}) {
					why[op] = "no push_delivered line for task " + o.taskID
				} else if !w.rcv.waitFor(c.id, 0, o.taskID, c.pushToken) {
					why[op] = "the receiver has no notification of task " + o.taskID + " with the token"
				}
			}
			if why[op] == "" && op == Send && c.agent == agentGo && !agentSawCaller(w, o.taskID, c.id) {
				why[op] = "the a2a-go agent did not receive Writ-Caller naming " + c.id
			}
			if why[op] == "" && c.door.records {
				if v := violations(lines, o.taskID); v != "" {
					why[op] = "writ logged a protocol violation for task " + o.taskID + ": " + v
				}
			}
			if why[op] == "" {
				res[op] = Result{Verdict: Pass}
				delete(pending, op)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for op := range pending {
		res[op] = Result{Verdict: Fail, Note: why[op]}
	}
	return res
}

// violations describes the protocol-violation lines of a task, "" if none.
func violations(lines []writproc.Line, taskID string) string {
	var out []string
	for _, l := range lines {
		if l.TaskID == taskID && l.Type == "task_protocol_violation" {
			out = append(out, l.From+" → "+l.To)
		}
	}
	return strings.Join(out, ", ")
}

// agentSawCaller: the a2a-go agent received the task's request with a
// Writ-Caller naming the caller (writ's header mutation reached it).
func agentSawCaller(w *world, taskID, caller string) bool {
	for _, o := range w.goFast.Requests() {
		if o.TaskID == taskID && strings.Contains(o.Caller, `"agent_id":"`+caller+`"`) {
			return true
		}
	}
	return false
}

// versions names what ran: the JS SDK from its installed package, a2a-go
// from the build, Node and Go.
func versions(t *testing.T) []string {
	var out []string
	root, _ := writproc.RepoRoot()
	var pkg struct {
		Version string `json:"version"`
	}
	if b, err := os.ReadFile(filepath.Join(root, "testdata/peers/js/node_modules/@a2a-js/sdk/package.json")); err == nil &&
		json.Unmarshal(b, &pkg) == nil {
		out = append(out, "@a2a-js/sdk "+pkg.Version)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/a2aproject/a2a-go" {
				out = append(out, "a2a-go "+f[1])
			}
		}
	}
	if b, err := exec.Command("node", "--version").Output(); err == nil {
		out = append(out, "Node "+strings.TrimSpace(string(b)))
	}
	out = append(out, runtime.Version())
	t.Logf("versions: %v", out)
	return out
}
