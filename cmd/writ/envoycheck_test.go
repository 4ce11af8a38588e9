package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
)

// TestEnvoyCheck: writ envoy-check against writ's real ext_proc and gRPC
// ext_authz listeners prints what Envoy would do, with exit 0 for a request
// let through and 1 for one writ answers; a missing file, an unknown mode
// and no listener are exit 2 with the reason.
func TestEnvoyCheck(t *testing.T) {
	agent := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(agent.Srv.URL)}, func(c *config.Config) {
		c.Envoy.ExtProcListen = "127.0.0.1:0"
		c.Envoy.GRPCListen = "127.0.0.1:0"
	})
	dir := t.TempDir()
	write := func(name, token string) string {
		p := filepath.Join(dir, name)
		msg := "POST /message:send HTTP/1.1\nHost: sanctions.example\nContent-Type: application/json\nA2A-Version: 1.0\n"
		if token != "" {
			msg += "Authorization: Bearer " + token + "\n"
		}
		msg += "\n" + `{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"Screen Acme Trading FZE"}]}}`
		if err := os.WriteFile(p, []byte(msg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	allowed := write("ok.http", h.Token(proxytest.Caller{Agent: "kyc-orchestrator", User: "u-1", Tenant: "wholesale", Class: "internal", Scopes: "delegate"}))
	anonymous := write("anon.http", "")
	for mode, listener := range map[string]string{"ext_proc": "envoy.ext_proc_listen", "ext_authz": "envoy.grpc_listen"} {
		addr := h.Server.ListenerAddr(listener)
		code, out, errOut := runCLI(t, "", "envoy-check", "-mode", mode, "-addr", addr, "-agent", "sanctions-screening-agent", "-request", allowed)
		if code != 0 || !strings.HasPrefix(out, mode+": allowed: Envoy sends the request on to the agent\n") || !strings.Contains(out, "  sets writ-caller: ") {
			t.Errorf("%s allowed: exit %d\n%s%s", mode, code, out, errOut)
		}
		code, out, errOut = runCLI(t, "", "envoy-check", "-mode", mode, "-addr", addr, "-agent", "sanctions-screening-agent", "-request", anonymous)
		if code != 1 || !strings.HasPrefix(out, mode+": answered by writ: Envoy answers 401 Unauthorized in the agent's place\n") || !strings.Contains(out, "UNAUTHENTICATED") {
			t.Errorf("%s anonymous: exit %d\n%s%s", mode, code, out, errOut)
		}
		code, _, errOut = runCLI(t, "", "envoy-check", "-mode", mode, "-addr", addr, "-request", allowed)
		if code != 1 || !strings.Contains(errOut, "no -agent") {
			t.Errorf("%s without -agent: exit %d %s", mode, code, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-request", filepath.Join(dir, "missing.http")}, "no such file"},
		{[]string{"-request", allowed, "-mode", "http"}, `-mode "http": ext_proc or ext_authz`},
		{[]string{"-agent", "a"}, "-request FILE is required"},
		{[]string{"-request", allowed, "-addr", "127.0.0.1:1", "-timeout", "2s"}, "ext_proc at 127.0.0.1:1"},
	} {
		if code, _, errOut := runCLI(t, "", append([]string{"envoy-check"}, c.args...)...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want 2 with %q", c.args, code, errOut, c.want)
		}
	}
}
