package envoycheck_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/envoycheck"
	"github.com/writ-authz/writ/internal/proxytest"
)

// send is a 1.0 SendMessage to the sanctions agent, as a request file holds
// it (LF line ends, no Content-Length).
func send(token string) []byte {
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\n"
	}
	return []byte("POST /message:send HTTP/1.1\nHost: sanctions.example\nContent-Type: application/json\nA2A-Version: 1.0\n" + auth +
		"\n" + `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Screen Acme Trading FZE"}]}}`)
}

// TestBothModesAgainstWrit: a request file through writ's real ext_proc and
// gRPC ext_authz listeners (the one assembly, the shipped policies): the
// allowed send is let through with the headers writ sets for the agent; an
// unauthenticated one, a denied one (a delegation too deep) and one whose
// route names no agent are answered by writ in the agent's place, with the
// protocol's error; the agent is asked nothing (a check does not forward).
func TestBothModesAgainstWrit(t *testing.T) {
	agent := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(agent.Srv.URL)}, func(c *config.Config) {
		c.Envoy.ExtProcListen = "127.0.0.1:0"
		c.Envoy.GRPCListen = "127.0.0.1:0"
	})
	ok := h.Token(proxytest.Caller{Agent: "kyc-orchestrator", User: "u-1", Tenant: "wholesale", Class: "internal", Scopes: "delegate"})
	deep := h.Token(proxytest.Caller{Agent: "x", Tenant: "wholesale", Scopes: "delegate", Chain: []string{"a", "b", "c", "d"}})
	for _, m := range []struct {
		name, listener string
		check          func(context.Context, grpc.ClientConnInterface, envoycheck.Request) (envoycheck.Result, error)
	}{
		{"ext_proc", "envoy.ext_proc_listen", envoycheck.Process},
		{"ext_authz", "envoy.grpc_listen", envoycheck.Check},
	} {
		t.Run(m.name, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///"+h.Server.ListenerAddr(m.listener), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ask := func(raw []byte, agentName string) envoycheck.Result {
				t.Helper()
				in, err := wire.ReadExample(raw, wire.DefaultMaxBodyBytes)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				res, err := m.check(ctx, conn, envoycheck.FromInbound(in, agentName))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			res := ask(send(ok), "sanctions-screening-agent")
			if !res.Allowed || res.Set["writ-decision-id"] == "" || !strings.Contains(res.Set["writ-caller"], "kyc-orchestrator") {
				t.Fatalf("allowed send: %+v", res)
			}
			for _, c := range []struct {
				name   string
				raw    []byte
				agent  string
				status int
				body   string
			}{
				{"no token", send(""), "sanctions-screening-agent", http.StatusUnauthorized, "UNAUTHENTICATED"},
				{"too deep", send(deep), "sanctions-screening-agent", http.StatusForbidden, "DEPTH_EXCEEDED"},
				{"no route name", send(ok), "", http.StatusInternalServerError, ""},
			} {
				res := ask(c.raw, c.agent)
				if res.Allowed || res.Status != c.status || !strings.Contains(string(res.Body), c.body) {
					t.Errorf("%s: %+v (body %s), want %d with %q", c.name, res, res.Body, c.status, c.body)
				}
			}
			if n := len(agent.Requests()); n != 0 {
				t.Errorf("the agent was asked %d times", n)
			}
		})
	}
}
