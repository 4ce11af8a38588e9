package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
)

// BenchmarkProbeForeign and BenchmarkProbeUnknown: a caller's GetTask of
// another caller's task id against one of an id writ never saw, through the
// admission core on the file store (what `writ serve` runs), each a first
// probe: the decision cache is off, so every request is decided as a first
// probe is. DESIGN §7 wants them to cost the same; compare their ns/op in one
// run (TestSecurityProbeSameWork checks they do the same work).
func BenchmarkProbeForeign(b *testing.B) { benchProbe(b, "t-") }

// BenchmarkProbeUnknown: see BenchmarkProbeForeign.
func BenchmarkProbeUnknown(b *testing.B) { benchProbe(b, "u-") }

func benchProbe(b *testing.B, prefix string) {
	const tasks = 64
	fs, err := filestore.Open(filepath.Join(b.TempDir(), "writ.db"), task.MemoryLimits{}, filestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	for i := range tasks {
		err := fs.Create(context.Background(), task.Record{Agent: "sanctions-screening-agent", Protocol: "a2a", Version: "1.0",
			Task: task.Task{ID: fmt.Sprint("t-", i), ContextID: fmt.Sprint("c-", i), State: task.Running,
				Chain: []string{"orchestrator"}, Classification: task.Restricted,
				Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	c, idp := benchCoreCache(b, fs, -1)
	tok, err := idp.Token(devidp.Caller{Agent: "retail-bot", User: "u-7", Tenant: "retail", Classification: "internal", Scope: "delegate"})
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([][]byte, tasks)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"%s%d"}}`, prefix, i)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	h.Set("A2A-Version", "1.0")
	h.Set("Content-Type", "application/json")
	i := 0
	for b.Loop() {
		out := c.Admit(context.Background(), proxy.Incoming{Method: http.MethodPost, Path: "/", Host: "writ.test",
			RemoteAddr: "127.0.0.1:5555", Query: url.Values{}, Header: h, Body: bodies[i%tasks]})
		if out.Fault == nil || out.Fault.Kind != task.KindTaskNotFound {
			b.Fatalf("outcome %v: %s", out.Kind, out.Answer.Body)
		}
		i++
	}
}
