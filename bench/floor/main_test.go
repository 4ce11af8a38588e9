package main

import (
	"context"
	"net"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The floor answers OK to any check, an empty one included: it reads nothing.
func TestFloorAllows(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	authv3.RegisterAuthorizationServer(srv, allow{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, req := range []*authv3.CheckRequest{{}, {Attributes: &authv3.AttributeContext{}}} {
		resp, err := authv3.NewAuthorizationClient(conn).Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus() == nil || resp.GetStatus().GetCode() != 0 {
			t.Fatalf("status = %v, want OK", resp.GetStatus())
		}
	}
}
