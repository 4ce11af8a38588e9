package proxy_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/task"
)

func TestReady(t *testing.T) {
	a2aAgent, err := seedagents.StartSanctions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2aAgent.Close() })
	acpAgent, err := seedagents.StartACP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acpAgent.Close() })
	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()
	kyc := config.Agent{Name: "kyc", Route: "/kyc", Upstream: acpAgent.URL, Protocol: "acp", MaxDataClassification: task.Internal, SecuritySchemes: []string{"oauth2"}}
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(a2aAgent.URL), kyc}, nil)
	if err := h.Core.Ready(t.Context()); err != nil {
		t.Fatalf("both agents answer: %v", err)
	}
	gone := proxytest.SanctionsAgent(downURL)
	gone.Name, gone.Route = "gone", "/gone"
	h = proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(a2aAgent.URL), gone}, nil)
	if err := h.Core.Ready(t.Context()); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("a down agent: %v", err)
	}
}

// TestReadiness: Readiness reports every agent, in configuration order, with
// what Ready asks it and Ready's error for it — a down agent does not hide
// the agents after it (Ready stops at the first).
func TestReadiness(t *testing.T) {
	a2aAgent, err := seedagents.StartSanctions()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a2aAgent.Close() })
	acpAgent, err := seedagents.StartACP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { acpAgent.Close() })
	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()
	gone := proxytest.SanctionsAgent(downURL)
	gone.Name, gone.Route = "gone", "/gone"
	kyc := config.Agent{Name: "kyc", Route: "/kyc", Upstream: acpAgent.URL, Protocol: "acp", MaxDataClassification: task.Internal, SecuritySchemes: []string{"oauth2"}}
	h := proxytest.New(t, []config.Agent{gone, proxytest.SanctionsAgent(a2aAgent.URL), kyc}, nil)
	got := h.Core.Readiness(t.Context())
	if len(got) != 3 {
		t.Fatalf("%d agents: %+v", len(got), got)
	}
	if got[0].Agent != "gone" || got[0].Asked != "its card" || got[0].Err == nil ||
		!strings.Contains(got[0].Err.Error(), "gone: its card is unavailable") {
		t.Errorf("the down agent: %+v", got[0])
	}
	if got[1].Agent != proxytest.SanctionsAgent("").Name || got[1].Asked != "its card" || got[1].Err != nil {
		t.Errorf("the sanctions agent: %+v", got[1])
	}
	if got[2].Agent != "kyc" || got[2].Asked != "GET /agents" || got[2].Err != nil {
		t.Errorf("the ACP agent: %+v", got[2])
	}
	if err := h.Core.Ready(t.Context()); err == nil || err.Error() != got[0].Err.Error() {
		t.Errorf("Ready says %v, Readiness %v", err, got[0].Err)
	}
}
