package main

import (
	"fmt"
	"io"
	"time"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/internal/envoycheck"
)

// envoyCheckCmd runs `writ envoy-check`: one request file sent to a running
// writ's Envoy listener as Envoy would send it, and what writ answered.
func envoyCheckCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("envoy-check", "writ envoy-check -request FILE -agent NAME [-mode ext_proc|ext_authz] [-addr HOST:PORT]",
		`Plays Envoy's part of one request against a running writ's Envoy listener, without Envoy:
ext_proc (a Process stream: the request's headers, then its buffered body) or gRPC ext_authz
(a CheckRequest), with the agent named as an Envoy route names it. Prints whether Envoy would
send the request on (and the headers writ sets or removes) or answer it in the agent's place
(status, headers, body). Exit 0 let through, 1 answered by writ, 2 a bad request file or no
listener. For Envoy's HTTP ext_authz mode, curl the http_listen address (docs/envoy.md).`)
	reqFile := fs.String("request", "", "a whole HTTP/1.1 request message (as writ eval reads it); - for stdin")
	agent := fs.String("agent", "", "the agent the Envoy route names (agents[].name)")
	mode := fs.String("mode", "ext_proc", "ext_proc or ext_authz (gRPC)")
	addr := fs.String("addr", "", "the listener (default: envoy.ext_proc_listen 127.0.0.1:9193, envoy.grpc_listen 127.0.0.1:9191)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for writ's answer")
	maxBody := fs.Int64("max-body", wire.DefaultMaxBodyBytes, "largest body read from the file, in bytes")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if *reqFile == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "writ envoy-check: -request FILE is required (and no arguments)")
		fs.Usage()
		return 2
	}
	return envoycheck.Run(envoycheck.Options{Request: *reqFile, Agent: *agent, Mode: *mode, Addr: *addr,
		Timeout: *timeout, MaxBody: *maxBody}, stdin, stdout, stderr)
}
