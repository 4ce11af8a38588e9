package server

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
)

// TestServeAuthZEN: authzen.listen starts the AuthZEN decision point beside
// the sidecar, over its core and engine (a delegation question and an
// application's are answered), shutdown closes it, and a policy set that
// lacks an application's decision refuses the start.
func TestServeAuthZEN(t *testing.T) {
	load := func(policies ...string) *config.Config {
		return seed(t, func(cfg *config.Config) {
			cfg.Policies = policies
			cfg.AuthZEN.Listen, cfg.AuthZEN.Clients = "127.0.0.1:0", []string{"payments-investigator"}
			cfg.AuthZEN.Applications = []config.AuthZENApplication{{Name: "todo", Package: "todo"}}
		})
	}
	sc, err := New(t.Context(), load("policies", "testdata/authzen/policies"), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range sc.doors {
		names = append(names, d.Name())
	}
	if strings.Join(names, ",") != "sidecar,authzen" {
		t.Fatalf("doors %v", names)
	}
	base := "http://" + sc.ListenerAddr("authzen.listen")
	raw, err := os.ReadFile("testdata/identity/bench_token.txt")
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(raw))
	post := func(path, body string) string {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(raw)
	}
	if got := post("/access/v1/evaluation", `{"subject": {"type": "agent", "id": "payments-investigator", "properties": {"token": "`+tok+`"}},
		"action": {"name": "send"}, "resource": {"type": "agent", "id": "sanctions-screening-agent"}}`); !strings.HasPrefix(got, `200 OK {"decision":true`) {
		t.Errorf("delegation: %s", got)
	}
	if got := post("/todo/access/v1/evaluation", `{"subject": {"type": "user", "id": "beth@the-smiths.com"},
		"action": {"name": "can_create_todo"}, "resource": {"type": "todo", "id": "todo-1"}}`); got != `200 OK {"decision":false}` {
		t.Errorf("todo: %s", got)
	}
	shutdown(t, sc)
	if _, err := (&http.Client{Timeout: time.Second}).Get(base + "/.well-known/authzen-configuration"); err == nil {
		t.Error("the AuthZEN listener still answers after shutdown")
	}
	if _, err := New(t.Context(), load("policies"), WithLogger(quiet())); err == nil || !strings.Contains(err.Error(), "data.todo.decision") {
		t.Errorf("a set without the application's package: %v", err)
	}
}
