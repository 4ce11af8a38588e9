package envoycheck

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
)

// Options are writ envoy-check's flags.
type Options struct {
	// Request is the request file ("-": stdin); Agent the agent the route
	// names; Mode ext_proc or ext_authz; Addr the listener ("": the mode's
	// default); Timeout how long to wait; MaxBody the largest body read.
	Request, Agent, Mode, Addr string
	Timeout                    time.Duration
	MaxBody                    int64
}

// Run is writ envoy-check: the request file sent as Envoy would, and what
// writ answered, printed; it returns the exit status (0 let through, 1
// answered by writ, 2 a bad file, mode or listener).
func Run(o Options, stdin io.Reader, stdout, stderr io.Writer) int {
	check := Process
	switch o.Mode {
	case "ext_proc":
		if o.Addr == "" {
			o.Addr = "127.0.0.1:9193"
		}
	case "ext_authz":
		check = Check
		if o.Addr == "" {
			o.Addr = "127.0.0.1:9191"
		}
	default:
		fmt.Fprintf(stderr, "writ envoy-check: -mode %q: ext_proc or ext_authz (for HTTP ext_authz, use curl)\n", o.Mode)
		return 2
	}
	var raw []byte
	var err error
	if o.Request == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(o.Request)
	}
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %v\n", err)
		return 2
	}
	in, err := wire.ReadExample(raw, o.MaxBody)
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %s: %v\n", o.Request, err)
		return 2
	}
	conn, err := grpc.NewClient("passthrough:///"+o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %v\n", err)
		return 2
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	res, err := check(ctx, conn, FromInbound(in, o.Agent))
	if err != nil {
		fmt.Fprintf(stderr, "writ envoy-check: %s at %s: %v\n", o.Mode, o.Addr, err)
		return 2
	}
	if res.Allowed {
		fmt.Fprintf(stdout, "%s: allowed: Envoy sends the request on to the agent\n", o.Mode)
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
	fmt.Fprintf(stdout, "%s: answered by writ: Envoy answers %d %s in the agent's place\n", o.Mode, res.Status, http.StatusText(res.Status))
	printHeader(stdout, res.Header)
	if res.Details != "" {
		fmt.Fprintf(stdout, "  (details: %s)\n", res.Details)
	}
	if len(res.Body) > 0 {
		fmt.Fprintf(stdout, "\n%s\n", strings.TrimRight(string(res.Body), "\n"))
	}
	if o.Agent == "" && res.Status == http.StatusInternalServerError {
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
