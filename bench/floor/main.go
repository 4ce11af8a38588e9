// Command floor is the bare ext_authz server of ../shared/BENCHMARKS.md's
// floor row: envoy.service.auth.v3.Authorization/Check answered OK at once,
// reading nothing of the request. bench/report runs it pinned to the core
// writ gets, in the same run as writ, so that writ's CPU per check and its
// tail latency at a fixed rate can be given as ratios to what gRPC alone
// costs on this host at that moment.
//
// Usage: floor -addr 127.0.0.1:19191
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

type allow struct {
	authv3.UnimplementedAuthorizationServer
}

var ok = &authv3.CheckResponse{Status: &status.Status{}}

func (allow) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return ok, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:19191", "where to listen (loopback)")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
	srv := grpc.NewServer()
	authv3.RegisterAuthorizationServer(srv, allow{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; srv.Stop() }()
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}
