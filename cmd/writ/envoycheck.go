package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

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
	check := envoycheck.Process
	switch *mode {
	case "ext_proc":
		if *addr == "" {
			*addr = "127.0.0.1:9193"
		}
	case "ext_authz":
		check = envoycheck.Check
		if *addr == "" {
			*addr = "127.0.0.1:9191"
		}
	default:
		fmt.Fprintf(stderr, "writ envoy-check: -mode %q: ext_proc or ext_authz (for HTTP ext_authz, use curl)\n", *mode)
		return 2
	}
	var raw []byte
	var err error
	if *reqFile == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(*reqFile)
	}
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %v\n", err)
		return 2
	}
	in, err := wire.ReadExample(raw, *maxBody)
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %s: %v\n", *reqFile, err)
		return 2
	}
	conn, err := grpc.NewClient("passthrough:///"+*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %v\n", err)
		return 2
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := check(ctx, conn, envoycheck.FromInbound(in, *agent))
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %s at %s: %v\n", *mode, *addr, err)
		return 2
	}
	if res.Allowed {
		fmt.Fprintf(stdout, "%s: allowed: Envoy sends the request on to the agent\n", *mode)
		keys := make([]string, 0, len(res.Set))
		for k := range res.Set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(stdout, "  sets %s: %s\n", k, res.Set[k])
		}
		for _, k := range res.Removed {
			fmt.Fprintf(stdout, "  removes %s\n", k)
		}
		if res.BodyReplaced {
			fmt.Fprintf(stdout, "  replaces the body (%d bytes)\n", len(res.Body))
		}
		return 0
	}
	fmt.Fprintf(stdout, "%s: answered by writ: Envoy answers %d %s in the agent's place\n", *mode, res.Status, http.StatusText(res.Status))
	printHeader(stdout, res.Header)
	if res.Details != "" {
		fmt.Fprintf(stdout, "  (details: %s)\n", res.Details)
	}
	if len(res.Body) > 0 {
		fmt.Fprintf(stdout, "\n%s\n", strings.TrimRight(string(res.Body), "\n"))
	}
	if *agent == "" && res.Status == http.StatusInternalServerError {
		fmt.Fprintln(stderr, "writ envoy-check: no -agent: writ refuses a request whose Envoy route names no agent (envoy.require_route_name)")
	}
	return 1
}

// printHeader prints h sorted, one "  name: value" line each.
func printHeader(w io.Writer, h http.Header) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			fmt.Fprintf(w, "  %s: %s\n", strings.ToLower(k), v)
		}
	}
}
