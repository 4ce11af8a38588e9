package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2apb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/seedagents"
)

// TestGRPCListenerMTLSCaller: with tls: set, an agent's gRPC listener
// (agents[].grpc_listen) serves TLS with the sidecar's certificate and
// verifies client certificates as the sidecar's listener does: a caller
// with a SPIFFE certificate is identified by it, admitted, and the agent
// (a2a-go's gRPC server, over h2c) receives that caller in writ-caller; a
// client without a certificate does not complete the handshake.
func TestGRPCListenerMTLSCaller(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, dir, "bank")
	serverCert, serverKey, _ := ca.issue("writ", true, "")
	_, _, client := ca.issue("investigator", false, investigatorID)
	agent, err := seedagents.StartSanctions(seedagents.WithGRPC())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	mapping := filepath.Join(dir, "spiffe.yaml")
	if err := os.WriteFile(mapping, []byte(investigatorID+": {agent_id: payments-investigator, tenant: wholesale, scopes: [delegate]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
listen: 127.0.0.1:0
admin: 127.0.0.1:0
store: {kind: memory}
decision_log: {output: 'off'}
tls:
  cert_file: ` + serverCert + `
  key_file: ` + serverKey + `
  client_ca_file: ` + ca.CAFile + `
identity:
  mtls: {trust_domain: bank.ae, mapping_file: ` + mapping + `}
agents:
  - name: sanctions-screening-agent
    protocol: a2a-grpc
    grpc_listen: 127.0.0.1:0
    upstream: ` + agent.URL + `
    tenants: [wholesale]
    max_data_classification: restricted
    security_schemes: [mtls]
`))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, sc)
	addr := sc.ListenerAddr("agents[0].grpc_listen")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	send := func(certs ...tls.Certificate) (*a2apb.SendMessageResponse, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots,
			Certificates: certs, MinVersion: tls.VersionTLS12})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return a2apb.NewA2AServiceClient(conn).SendMessage(ctx, &a2apb.SendMessageRequest{Request: &a2apb.Message{MessageId: "m-1",
			Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: "Screen Acme Trading FZE"}}}}})
	}
	resp, err := send(client)
	if err != nil || resp.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("mTLS caller: %v %v", resp, err)
	}
	var got map[string]any
	obs := agent.Requests()
	if err := json.Unmarshal([]byte(obs[len(obs)-1].Caller), &got); err != nil {
		t.Fatalf("writ-caller %q: %v", obs[len(obs)-1].Caller, err)
	}
	if got["method"] != "mtls" || got["agent_id"] != "payments-investigator" || got["tenant"] != "wholesale" {
		t.Fatalf("the agent received writ-caller %v", got)
	}
	before := len(agent.Requests())
	if _, err := send(); err == nil {
		t.Error("a client without a certificate was served")
	}
	if len(agent.Requests()) != before {
		t.Error("a call without a client certificate reached the agent")
	}
}
