package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
)

// rawRequest sends one HTTP/1.1 request to addr with exactly this target and
// Host (no client library cleans either), and returns the status and body.
func rawRequest(t *testing.T, addr, method, target, host string, hdr map[string]string, body []byte) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, host, len(body))
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestSecurityCanonicalTarget — Threat: a request target that routers read
// differently ("/%6Byc/", "/kyc/../", "//kyc/", "/kyc%2F..", a host with a
// trailing dot or in upper case) is decided by writ for one agent while a
// router in front, or the agent's own server, reads it as another path or
// agent, so one agent's policy admits a request another executes. Defence:
// the sidecar applies Envoy mode's canonical-form rule to the raw target —
// the request line's path as sent and the Host header — and refuses any
// other form with a plain 400 before any agent is chosen; canonical targets
// are decided as before.
func TestSecurityCanonicalTarget(t *testing.T) {
	send, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": proxytest.SendParams})
	send1 := func(t *testing.T, h *proxytest.Harness, target, host string) (int, []byte) {
		return rawRequest(t, strings.TrimPrefix(h.Srv.URL, "http://"), "POST", target, host,
			map[string]string{"Content-Type": "application/json", "A2A-Version": "1.0",
				"Authorization": "Bearer " + h.Token(proxytest.RetailBot)}, send)
	}
	t.Run("path", func(t *testing.T) {
		root, kyc := proxytest.NewFakeAgent(t, nil), proxytest.NewFakeAgent(t, nil)
		h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(root.Srv.URL), kycAgent(kyc.Srv.URL)}, nil)
		for _, target := range []string{"/%6Byc/", "/kyc/../", "//kyc/", "/kyc%2F..", "/kyc/%2e%2e/", "/kyc\\..\\"} {
			st, body := send1(t, h, target, "writ.test")
			if st != http.StatusBadRequest || !strings.Contains(string(body), "canonical form") {
				t.Errorf("%s: %d %s, want 400 (not in canonical form)", target, st, body)
			}
		}
		if n, m := len(root.Requests()), len(kyc.Requests()); n+m != 0 {
			t.Fatalf("the agents received %d and %d requests", n, m)
		}
		if st, body := send1(t, h, "/kyc/", "writ.test"); st != http.StatusOK || len(kyc.Requests()) != 1 {
			t.Errorf("canonical /kyc/: %d %s, kyc reached %d times", st, body, len(kyc.Requests()))
		}
	})
	t.Run("host", func(t *testing.T) {
		root, kyc := proxytest.NewFakeAgent(t, nil), proxytest.NewFakeAgent(t, nil)
		k := kycAgent(kyc.Srv.URL)
		k.Route, k.Hosts = "/", []string{"kyc.example"}
		h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(root.Srv.URL), k}, nil)
		for _, host := range []string{"kyc.example.", "KYC.example", "kyc.example.:8080"} {
			if st, body := send1(t, h, "/", host); st != http.StatusBadRequest || !strings.Contains(string(body), "canonical form") {
				t.Errorf("Host %s: %d %s, want 400 (not in canonical form)", host, st, body)
			}
		}
		if n, m := len(root.Requests()), len(kyc.Requests()); n+m != 0 {
			t.Fatalf("the agents received %d and %d requests", n, m)
		}
		if st, body := send1(t, h, "/", "kyc.example:8080"); st != http.StatusOK || len(kyc.Requests()) != 1 {
			t.Errorf("canonical kyc.example:8080: %d %s, kyc reached %d times", st, body, len(kyc.Requests()))
		}
	})
}
