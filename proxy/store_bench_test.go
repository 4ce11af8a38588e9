package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/redistest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/redisstore"
)

// The cost of a lifecycle store on the allow path, measured where it is paid:
// one allowed request through the admission core — limits, parse, a verified
// JWT caller, the policy decision on the shipped policy, the forward plan —
// and the agent's real a2a-go 0.3 answer (testdata) observed through the
// plan, which records it in the store. Shapes:
//
//   - stream: message/stream of a new task: Create (durable), its working
//     state and artifact (two lazy Applies), its completion (a durable Apply);
//   - send: a blocking message/send answered with the completed task: one
//     Create (durable);
//   - get: tasks/get of a task the caller owns: the lookup, and an Apply of
//     the state the agent repeats (lazy).
//
// "miss" puts each request in a new context, so the decision cache cannot
// answer (the policy is evaluated); "hit" repeats the request (answered from
// the cache). Compare each store's ns/op with memory's in the same run:
// docs/state.md ("Cost on the allow path") records the ratios.

// fixture is the body of a request or response file of testdata.
func fixture(b *testing.B, name string) []byte {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "a2a", "v0.3", "jsonrpc", name))
	if err != nil {
		b.Fatal(err)
	}
	if r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw))); err == nil {
		body, _ := io.ReadAll(r.Body)
		return body
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return body
}

// shape is one kind of allowed request with the agent's answer; the task and
// context ids of the answer are replaced per iteration unless fixed.
type shape struct {
	name          string
	req, answer   []byte
	taskID, ctxID string
	messageID     string
	stream        bool
	fixed         bool // the same task every time (a follow-up)
}

func shapes(b *testing.B) []shape {
	return []shape{
		{name: "stream", req: fixture(b, "stream.request.http"), answer: fixture(b, "stream.response.http"),
			taskID: "01a22b22-6029-72f6-8691-116538658d2c", ctxID: "01a22b22-6029-7325-ac16-9a6a3ba34882",
			messageID: "msg-jsonrpc-stream", stream: true},
		{name: "send", req: fixture(b, "send.request.http"), answer: fixture(b, "send.response.http"),
			taskID: "01a22b22-601b-7889-b667-ea087f731af6", ctxID: "01a22b22-601b-7d7d-ac7e-5df084dc683e",
			messageID: "msg-jsonrpc-send"},
		{name: "get", req: fixture(b, "get.request.http"), answer: fixture(b, "get.response.http"),
			taskID: "01a22b22-601b-7889-b667-ea087f731af6", fixed: true},
	}
}

// benchCore is the admission core on the shipped policy over store s.
func benchCore(b *testing.B, s task.Store) (*proxy.Core, string) {
	b.Helper()
	c, idp := benchCoreCache(b, s, 0)
	tok, err := idp.Token(devidp.Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale",
		Classification: "restricted", Scope: "delegate", Chain: []string{"orchestrator"}})
	if err != nil {
		b.Fatal(err)
	}
	return c, tok
}

// benchCoreCache is benchCore with a decision cache of cacheSize (-1: none),
// and the identity provider that signs its callers' tokens.
func benchCoreCache(b *testing.B, s task.Store, cacheSize int) (*proxy.Core, *devidp.Provider) {
	b.Helper()
	idp, err := devidp.New(b.TempDir(), proxytest.Issuer, "writ")
	if err != nil {
		b.Fatal(err)
	}
	yaml := "policies: [../policies]\n" +
		"identity:\n  jwt:\n    - issuer: " + proxytest.Issuer + "\n      audiences: [writ]\n      jwks_file: " + idp.JWKSFile + "\n" +
		"agents:\n  - {name: sanctions-screening-agent, upstream: 'http://127.0.0.1:1', protocol: a2a, owner: group-compliance, " +
		"tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2], " +
		"skills: [{id: screen, tags: [sanctions]}]}\n"
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(context.Background(), cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		b.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{CacheSize: cacheSize})
	if err != nil {
		b.Fatal(err)
	}
	c, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c, idp
}

var benchSeq atomic.Int64

// allowed sends one allowed request of shape sh and relays the agent's answer.
func allowed(b *testing.B, c *proxy.Core, tok string, sh shape, miss bool) {
	n := strconv.FormatInt(benchSeq.Add(1), 10)
	body := sh.req
	if miss { // a new context: the policy input differs, the cache cannot answer
		body = bytes.Replace(body, []byte(`"messageId":"`+sh.messageID+`"`),
			[]byte(`"messageId":"`+sh.messageID+`","contextId":"ctx-`+n+`"`), 1)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	h.Set("Content-Type", "application/json")
	h.Set("X-A2a-Extensions", "urn:writ:ext:classification:v1")
	out := c.Admit(context.Background(), proxy.Incoming{Method: http.MethodPost, Path: "/", Host: "writ.test",
		RemoteAddr: "127.0.0.1:5555", Query: url.Values{}, Header: h, Body: body})
	if out.Kind != proxy.Forward {
		b.Fatalf("outcome %v: %s", out.Kind, out.Answer.Body)
	}
	answer := string(sh.answer)
	if !sh.fixed {
		answer = strings.NewReplacer(sh.taskID, "task-"+n, sh.ctxID, "ctx-"+n).Replace(answer)
	}
	p := out.Plan
	if sh.stream {
		if failure := p.Stream(context.Background(), strings.NewReader(answer), func([]byte) error { return nil }); failure != "" {
			b.Fatal(failure)
		}
	} else if _, refused := p.Answer(context.Background(), http.StatusOK, []byte(answer)); refused != nil {
		b.Fatalf("refused: %s", refused.Body)
	}
	if p.Failed() != nil || p.InvalidAnswers() != 0 {
		b.Fatalf("the answer was not recorded: %v, %d invalid", p.Failed(), p.InvalidAnswers())
	}
}

// BenchmarkAllowPath: decision + lifecycle of one allowed request, per shape
// and store, serially and from 16 concurrent requests.
func BenchmarkAllowPath(b *testing.B) {
	file, err := filestore.Open(filepath.Join(b.TempDir(), "writ.db"), task.MemoryLimits{}, filestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { file.Close() })
	srv := redistest.Start(b)
	rs, err := redisstore.New(task.MemoryLimits{}, redisstore.Options{Addr: srv.Addr()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	stores := []struct {
		name string
		s    task.Store
	}{{"memory", task.NewMemoryStore(task.MemoryLimits{})}, {"file", file}, {"redis", rs}}
	for _, sh := range shapes(b) {
		for _, decision := range []string{"miss", "hit"} {
			if sh.fixed && decision == "miss" || sh.name == "send" && decision == "hit" {
				continue
			}
			for _, st := range stores {
				c, tok := benchCore(b, st.s)
				if sh.fixed { // the task the follow-up names, owned by the caller
					send := shapes(b)[1]
					send.fixed = true
					allowed(b, c, tok, send, false)
				}
				miss := decision == "miss"
				b.Run(fmt.Sprintf("%s/%s/%s/serial", sh.name, decision, st.name), func(b *testing.B) {
					for b.Loop() {
						allowed(b, c, tok, sh, miss)
					}
				})
				b.Run(fmt.Sprintf("%s/%s/%s/parallel", sh.name, decision, st.name), func(b *testing.B) {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							allowed(b, c, tok, sh, miss)
						}
					})
				})
			}
		}
	}
}
