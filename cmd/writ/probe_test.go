package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-authz/writ/internal/seedagents"
)

// TestValidateProbe: `writ validate -probe` asks every agent what writ
// serve's /readyz asks (an A2A agent's card, an ACP agent's listing) and
// says per agent what readiness would say; an agent whose card is
// unavailable is an error naming its upstream key, and the exit status is 1.
// Without -probe, validate checks the policy's reachability only and says ok
// while an agent is down (-strict too, the seed's warnings aside). Before
// -probe, validate had no way to say that an agent was down (issue 27 item 8).
func TestValidateProbe(t *testing.T) {
	chdirRoot(t)
	a2a, err := seedagents.StartSanctions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2a.Close() })
	acp, err := seedagents.StartACP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acp.Close() })
	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()

	write := func(marketing string) string {
		s := strings.Replace(seedYAML(t), "upstream: http://127.0.0.1:9101", "upstream: "+a2a.URL, 1)
		s = strings.Replace(s, "upstream: http://127.0.0.1:9102", "upstream: "+acp.URL+"\n    protocol: acp", 1)
		s = strings.Replace(s, "upstream: http://127.0.0.1:9103", "upstream: "+marketing, 1)
		p := filepath.Join(t.TempDir(), "writ.yaml")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write(downURL)
	code, out, errOut := runCLI(t, "", "validate", "-offline", "-config", cfg)
	if code != 0 {
		t.Fatalf("without -probe validate checks no network: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "", "validate", "-offline", "-probe", "-config", cfg)
	for _, want := range []string{
		cfg + ": note: -probe: sanctions-screening-agent: ready (its card answered)",
		cfg + ": note: -probe: kyc-refresh-agent: ready (GET /agents answered)",
		"error: agents[2].upstream: -probe: not ready: marketing-copy-agent: its card is unavailable",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("-probe with marketing-copy-agent down: no %q in\n%s", want, errOut)
		}
	}
	if code != 1 || !strings.Contains(out, "invalid: "+cfg+": 1 error(s)") {
		t.Errorf("-probe with an agent down: exit %d\n%s", code, out)
	}
	// The error carries the line of the agent's upstream key.
	raw, _ := os.ReadFile(cfg)
	line := 0
	for i, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "upstream: "+downURL) {
			line = i + 1
		}
	}
	if !strings.Contains(errOut, cfg+":"+strconv.Itoa(line)+": error: agents[2].upstream") {
		t.Errorf("the error names line %d:\n%s", line, errOut)
	}

	// Every agent up: ok, and each one's readiness said.
	cfg = write(a2a.URL)
	code, out, errOut = runCLI(t, "", "validate", "-offline", "-probe", "-config", cfg)
	if code != 0 || !strings.Contains(errOut, "marketing-copy-agent: ready (its card answered)") {
		t.Fatalf("-probe, every agent up: exit %d\n%s\n%s", code, out, errOut)
	}
}
