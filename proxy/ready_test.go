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
