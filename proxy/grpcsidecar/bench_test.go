package grpcsidecar_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2apb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/server"
	"github.com/writ-authz/writ/task"
)

// BenchmarkDoorSend: one allowed, blocking send through writ, in process,
// to the same a2a-go sanctions agent served over JSON-RPC (the sidecar's
// HTTP door) and over gRPC (the gRPC door), in one run: compare the two
// ns/op for the gRPC door's cost per call relative to the JSON-RPC door's.
// Each call is decided (the decision cache is off), forwarded, and its
// answer recorded in the lifecycle store.
func BenchmarkDoorSend(b *testing.B) {
	jsonAgent, err := seedagents.StartSanctions()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { jsonAgent.Close() })
	grpcAgent, err := seedagents.StartSanctions(seedagents.WithGRPC())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { grpcAgent.Close() })
	idp, err := devidp.New(b.TempDir(), proxytest.Issuer, "writ")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Parse([]byte("admin: 127.0.0.1:0\nlisten: 127.0.0.1:0\ndecision_log: {output: 'off'}\ndecision_cache_size: -1\n" +
		"push: {disabled: true}\npolicies: [" + proxytest.Policies() + "]\nlimits: {upstream_timeout: 5s, stream_idle_timeout: 5s}\n" +
		"identity:\n  jwt:\n    - issuer: " + proxytest.Issuer + "\n      audiences: [writ]\n      jwks_file: " + idp.JWKSFile + "\n" +
		"agents:\n  - {name: placeholder, upstream: 'http://127.0.0.1:1', max_data_classification: public, security_schemes: [oauth2]}\n"))
	if err != nil {
		b.Fatal(err)
	}
	j := proxytest.SanctionsAgent(jsonAgent.URL)
	j.Protocol, j.Route, j.JSONRPCPath = "a2a", "/", "/"
	g := proxytest.SanctionsAgent(grpcAgent.URL)
	g.Name, g.Route, g.Protocol, g.GRPCListen = "sanctions-grpc", "/grpc", "a2a-grpc", "127.0.0.1:0"
	g.JSONRPCPath = "/"
	cfg.Agents = []config.Agent{j, g}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	store := task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1 << 20, MaxPerOwner: 1 << 20, TTL: time.Hour})
	s, err := server.New(context.Background(), cfg, server.WithLogger(slog.New(slog.DiscardHandler)), server.WithStore(store),
		server.WithoutPolicyTests())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	tok, err := idp.Token(devidp.Caller{Agent: "payments-investigator", User: "u-42", Tenant: "wholesale",
		Classification: "restricted", Scope: "delegate", Chain: []string{"orchestrator"}})
	if err != nil {
		b.Fatal(err)
	}

	b.Run("jsonrpc", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		i := 0
		for b.Loop() {
			i++
			body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-%d","role":"user","parts":[{"kind":"text","text":"Screen Acme"}]}}}`, i)
			req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"completed"`)) {
				b.Fatalf("%d %s", resp.StatusCode, out)
			}
		}
	})
	b.Run("grpc", func(b *testing.B) {
		conn, err := grpc.NewClient(s.ListenerAddr("agents[1].grpc_listen"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		client := a2apb.NewA2AServiceClient(conn)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
		i := 0
		for b.Loop() {
			i++
			resp, err := client.SendMessage(ctx, &a2apb.SendMessageRequest{Request: &a2apb.Message{MessageId: fmt.Sprint("m-", i),
				Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Part: &a2apb.Part_Text{Text: "Screen Acme"}}}}})
			if err != nil {
				b.Fatal(err)
			}
			if resp.GetTask().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_COMPLETED {
				b.Fatalf("answer %v", resp)
			}
		}
	})
}
