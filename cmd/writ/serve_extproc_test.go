package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/writ-authz/writ/config"
)

// TestServeExtProc: envoy.ext_proc_listen starts the ext_proc server beside
// the sidecar (health SERVING for the ExternalProcessor service) and
// shutdown stops it (NOT_SERVING, then closed).
func TestServeExtProc(t *testing.T) {
	chdirRoot(t)
	cfg, err := config.Load("testdata/config/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Admin, cfg.Envoy.ExtProcListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Push.Disabled = true
	sc, err := startSidecar(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if sc.extproc == nil || sc.envoy != nil {
		t.Fatalf("ext_proc %v, ext_authz %v", sc.extproc, sc.envoy)
	}
	conn, err := grpc.NewClient("passthrough:///"+sc.extproc.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", resp, err)
	}
	sc.shutdown(2 * time.Second)
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("ext_proc still answers after shutdown")
	}
}
