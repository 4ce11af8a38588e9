package proxytest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
)

// MaxDepthLogged is the deepest delegation chain DepthLog sends at.
const MaxDepthLogged = 4

// DepthLog is a decision log written by a real writ with each decision's
// policy input on its line (decision_log.include_input, then mutate): the
// shipped policies in front of a fake sanctions agent, and from a caller
// of the wholesale tenant two sends at every delegation depth from 0 to
// MaxDepthLogged (delegation_chain of that length) and a GetTask at depth 3.
// writ is shut down before it returns, so the log is whole; its path is
// returned.
func DepthLog(t *testing.T, mutate func(*config.Config)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	up := NewFakeAgent(t, nil)
	h := New(t, []config.Agent{SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.DecisionLog.Output, c.DecisionLog.IncludeInput = path, true
		if mutate != nil {
			mutate(c)
		}
	})
	for depth := range MaxDepthLogged + 1 {
		c := Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale", Class: "restricted", Scopes: "delegate"}
		for i := range depth {
			c.Chain = append(c.Chain, fmt.Sprintf("hop-%d", i))
		}
		tok := h.Token(c)
		for range 2 {
			h.RPC("/", tok, "1.0", "SendMessage", SendParams)
		}
		if depth == 3 {
			h.RPC("/", tok, "1.0", "GetTask", map[string]any{"id": "t-1"})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	return path
}
