package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
)

// TestCanonicalForm: the one spelling of a path and a host writ routes on,
// and each other spelling named.
func TestCanonicalForm(t *testing.T) {
	for path, want := range map[string]string{
		"/":                       "",
		"/kyc":                    "",
		"/kyc/":                   "",
		"/kyc/tasks/t-1:cancel":   "",
		"/kyc/a%20b":              "", // a space must be encoded
		"/kyc/a%3ab%3A":           "", // reserved, either hex case
		"/%6Byc/":                 "a percent-encoded unreserved character",
		"/kyc/%7E":                "a percent-encoded unreserved character",
		"/kyc/%2E%2E/":            "a percent-encoded unreserved character",
		"/kyc%2F..":               "an encoded slash",
		"/kyc%2f":                 "an encoded slash",
		"/kyc%5C":                 "an encoded slash",
		"/kyc\\..\\":              "a backslash",
		"/kyc/../":                "a dot segment",
		"/kyc/..":                 "a dot segment",
		"/./kyc":                  "a dot segment",
		"//kyc/":                  "an empty segment (//)",
		"/kyc//x":                 "an empty segment (//)",
		"/kyc%":                   "malformed percent-encoding",
		"/kyc%4":                  "malformed percent-encoding",
		"/kyc%zz":                 "malformed percent-encoding",
		"kyc":                     "the path does not start with /",
		"/kyc/..x/.x/x./...":      "",
		"/tasks/t-1/pushConfigs/": "",
	} {
		if got := proxy.NonCanonicalPath(path); got != want {
			t.Errorf("path %q: %q, want %q", path, got, want)
		}
	}
	for host, want := range map[string]string{
		"kyc.example":       "",
		"kyc.example:8443":  "",
		"[::1]:8080":        "",
		"":                  "",
		"kyc.example.":      "a trailing dot",
		"kyc.example.:8443": "a trailing dot",
		"KYC.example":       "upper-case letters in the host",
		"kyc.example:":      "the port is not digits",
		"kyc.example:x1":    "the port is not digits",
	} {
		if got := proxy.NonCanonicalHost(host); got != want {
			t.Errorf("host %q: %q, want %q", host, got, want)
		}
	}
}

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

// FuzzCanonicalPath: a path writ accepts as canonical is one every reading
// agrees on — Envoy's normalisation (extproctest's model of normalize_path,
// merge_slashes and escaped-slash rejection) leaves it as it is (but for the
// case of its escapes' hex digits, which decode alike), and a route
// covers its raw form (Envoy's path_separated_prefix) exactly when it covers
// its decoded form (how writ matches) — so no router in front can send it to
// another agent than writ decides for.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{"/", "/kyc", "/kyc/", "/%6Byc/", "/kyc/../", "//kyc/", "/kyc%2F..", "/kyc%3A/x",
		"/kyc%20", "/kycx", "/k%79c/t", "/kyc\\x", "/kyc/%2e"} {
		f.Add(s)
	}
	envoy := &extproctest.Envoy{Normalize: true}
	f.Fuzz(func(t *testing.T, raw string) {
		if proxy.NonCanonicalPath(raw) != "" || strings.ContainsAny(raw, "?#") {
			return
		}
		if got := envoy.Routing("h", raw); got.Rejected || got.Target != upperEscapes(raw) {
			t.Fatalf("canonical %q: Envoy normalises it to %q (rejected %v)", raw, got.Target, got.Rejected)
		}
		decoded, err := url.PathUnescape(raw)
		if err != nil {
			t.Fatalf("canonical %q does not decode: %v", raw, err)
		}
		_, writ := proxy.PrefixCovers("/kyc", decoded)
		if envoyMatch := raw == "/kyc" || strings.HasPrefix(raw, "/kyc/"); envoyMatch != writ {
			t.Fatalf("canonical %q: Envoy's /kyc route %v, writ's %v", raw, envoyMatch, writ)
		}
	})
}

// upperEscapes is raw with the hex digits of its escapes in upper case.
func upperEscapes(raw string) string {
	b := []byte(raw)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			copy(b[i+1:i+3], strings.ToUpper(string(b[i+1:i+3])))
			i += 2
		}
	}
	return string(b)
}
