package extauthz

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/devidp"
	"github.com/writ-authz/writ/internal/seedagents"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/extproc"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
	"github.com/writ-authz/writ/task"
)

// verdict is what became of one request behind Envoy.
type verdict string

const (
	allowed verdict = "allowed" // writ let it through
	denied  verdict = "denied"  // writ's policy refused it (403)
	refused verdict = "refused" // refused before a decision (400, 404, 500), by writ or by Envoy
)

// routedWorld is writ with two agents behind each Envoy door: root-agent
// (wholesale callers only) and kyc-agent (retail callers only), so a
// decision made for the wrong agent shows as the wrong verdict.
type routedWorld struct {
	w      *world
	cfg    *config.Config
	agents map[string]*seedagents.Agent
	routes []extproctest.Route // Envoy's routes, in the shape writ's agents have
	proc   *extproc.Server
}

// newRoutedWorld starts the agents and writ's three Envoy doors. byHost puts
// kyc-agent on host kyc.example at "/" instead of on route /kyc.
func newRoutedWorld(t *testing.T, byHost, requireNames bool) *routedWorld {
	t.Helper()
	rw := &routedWorld{agents: map[string]*seedagents.Agent{}}
	for _, name := range []string{"root-agent", "kyc-agent"} {
		a, err := seedagents.StartSanctions(seedagents.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		rw.agents[name] = a
	}
	idp, err := devidp.New(t.TempDir(), testIssuer, "writ")
	if err != nil {
		t.Fatal(err)
	}
	kycRoute := "route: /kyc"
	if byHost {
		kycRoute = "route: /, hosts: [kyc.example]"
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: [../../policies]
identity:
  jwt: [{issuer: %s, audiences: [writ], jwks_file: %s}]
envoy: {grpc_listen: '127.0.0.1:0', http_listen: '127.0.0.1:0', ext_proc_listen: '127.0.0.1:0', require_route_name: %v}
agents:
  - {name: root-agent, route: /, upstream: '%s', protocol: a2a,
     tenants: [wholesale], max_data_classification: restricted, security_schemes: [oauth2]}
  - {name: kyc-agent, %s, upstream: '%s', protocol: a2a,
     tenants: [retail], max_data_classification: restricted, security_schemes: [oauth2]}
`, testIssuer, idp.JWKSFile, requireNames, rw.agents["root-agent"].URL, kycRoute, rw.agents["kyc-agent"].URL)
	if rw.cfg, err = config.Parse([]byte(yaml)); err != nil {
		t.Fatal(err)
	}
	ident, err := identity.New(rw.cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(context.Background(), rw.cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := proxy.New(rw.cfg, proxy.Deps{Identity: ident, Engine: engine, Logger: quiet,
		Store: task.NewMemoryStore(task.MemoryLimits{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	ext, err := New(core, ident, rw.cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Listen(); err != nil {
		t.Fatal(err)
	}
	if rw.proc, err = extproc.New(core, ident, rw.cfg, quiet); err != nil {
		t.Fatal(err)
	}
	if err := rw.proc.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ext.Shutdown(ctx)
		rw.proc.Shutdown(ctx)
	})
	rw.w = &world{t: t, ext: ext, idp: idp}
	rw.w.connect()
	for _, a := range rw.cfg.Agents {
		rw.routes = append(rw.routes, extproctest.Route{Hosts: a.Hosts, Prefix: a.Route, Upstream: a.Upstream})
	}
	return rw
}

// envoy is Envoy's routing as deploy/envoy sets it up (named: each route
// names its agent; normalize: the connection manager normalises).
func (rw *routedWorld) envoy(named, normalize bool) *extproctest.Envoy {
	e := &extproctest.Envoy{Normalize: normalize}
	for _, rt := range rw.routes {
		if named {
			rt.Name = agentOf(rw, &rt)
		}
		e.Routes = append(e.Routes, rt)
	}
	return e
}

// sends counts the message/send requests an agent received.
func (rw *routedWorld) sends(name string) (n int) {
	for _, o := range rw.agents[name].Requests() {
		if o.Method == "message/send" {
			n++
		}
	}
	return n
}

// permitted is the shipped policy's answer for a caller at an agent: each
// agent serves one tenant.
func permitted(c caller, agent string) bool {
	return (agent == "kyc-agent") == (c.tenant == "retail")
}

var retailCaller = caller{agent: "retail-bot", user: "u-7", tenant: "retail", class: "internal", scopes: "delegate"}

// rawSend sends a message/send to addr with exactly this target and Host,
// which no client library cleans.
func rawSend(t *testing.T, addr, target, host, token string, extra map[string]string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := sendBody("x")
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n",
		target, host, token, len(body))
	for k, v := range extra {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()+string(body)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func verdictOf(status int) verdict {
	switch status {
	case http.StatusOK:
		return allowed
	case http.StatusForbidden:
		return denied
	}
	return refused
}

// door sends one request (target, Host) from caller c through one Envoy
// door in front of writ, and reports the verdict and the agent Envoy
// forwards it to ("" none).
type routedDoor func(t *testing.T, e *extproctest.Envoy, c caller, target, host string) (verdict, string)

func (rw *routedWorld) doors() map[string]routedDoor {
	return map[string]routedDoor{
		// gRPC ext_authz: the check as Envoy's filter sends it after the
		// connection manager (and its normalisation); the router then
		// forwards to the route chosen for the request.
		"ext_authz gRPC": func(t *testing.T, e *extproctest.Envoy, c caller, target, host string) (verdict, string) {
			rd := e.Routing(host, target)
			if rd.Rejected {
				return refused, ""
			}
			cr := checkRequest(post(rd.Target, rw.w.token(c), sendBody("x")))
			h := cr.Attributes.Request.Http
			h.Path, h.Host, h.Headers[":path"], h.Headers[":authority"] = rd.Target, rd.Authority, rd.Target, rd.Authority
			agent := ""
			if rd.Route != nil {
				agent = agentOf(rw, rd.Route)
				if rd.Route.Name != "" {
					cr.Attributes.ContextExtensions = map[string]string{envoyreq.RouteKey: rd.Route.Name}
				}
			}
			a := checkAnswer(rw.w.check(cr))
			if a.forwarded {
				return allowed, agent
			}
			return verdictOf(a.status), agent
		},
		// HTTP ext_authz: the same, as http_service sends it (the route's
		// name in the header its per-route http_service adds).
		"ext_authz HTTP": func(t *testing.T, e *extproctest.Envoy, c caller, target, host string) (verdict, string) {
			rd := e.Routing(host, target)
			if rd.Rejected {
				return refused, ""
			}
			extra := map[string]string{}
			agent := ""
			if rd.Route != nil {
				agent = agentOf(rw, rd.Route)
				if rd.Route.Name != "" {
					extra[RouteHeader] = rd.Route.Name
				}
			}
			return verdictOf(rawSend(t, rw.w.ext.HTTPAddr(), rd.Target, rd.Authority, rw.w.token(c), extra)), agent
		},
		// ext_proc: the test Envoy itself routes, asks writ, and forwards
		// to the agent, which then counts what it received.
		"ext_proc": func(t *testing.T, e *extproctest.Envoy, c caller, target, host string) (verdict, string) {
			conn, err := grpc.NewClient("passthrough:///"+rw.proc.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			e.Client = extprocv3.NewExternalProcessorClient(conn)
			srv := httptest.NewServer(e)
			defer srv.Close()
			before := map[string]int{"root-agent": rw.sends("root-agent"), "kyc-agent": rw.sends("kyc-agent")}
			v := verdictOf(rawSend(t, strings.TrimPrefix(srv.URL, "http://"), target, host, rw.w.token(c), nil))
			reached := ""
			for name, n := range before {
				if rw.sends(name) > n {
					if reached != "" {
						t.Fatalf("%s %s reached both agents", host, target)
					}
					reached = name
				}
			}
			// Where this Envoy forwards it (when writ lets it through).
			agent := ""
			if rd := e.Routing(host, target); rd.Route != nil {
				agent = agentOf(rw, rd.Route)
			}
			if v == allowed && reached != agent || v != allowed && reached != "" {
				t.Fatalf("%s %s: %s, routed to %q, executed by %q", host, target, v, agent, reached)
			}
			return v, agent
		},
	}
}

// agentOf is the agent behind an Envoy route.
func agentOf(rw *routedWorld, rt *extproctest.Route) string {
	for _, a := range rw.cfg.Agents {
		if a.Upstream == rt.Upstream {
			return a.Name
		}
	}
	return ""
}

// TestSecurityEnvoyRoutingDifferential — Threat: behind Envoy, writ picks
// the agent from the percent-decoded path and a Host it lower-cases and
// strips of a trailing dot, while Envoy routes on the raw :path and the
// :authority as sent: "POST /%6Byc/" or "/kyc%2F.." is decided as the /kyc
// agent (whose policy admits the caller) and executed by the agent at "/";
// "Host: kyc.example." likewise, so one agent's tenant and scope checks
// admit requests another agent runs. Defence: the agent is the one Envoy's
// route names (writ-agent: ext_authz context_extensions, the ext_proc
// stream's metadata, the HTTP check's header), and where no route names
// one, a raw path or authority not in canonical form is refused; a
// non-canonical path is refused even with a name. Every request below, in
// every door, with and without route names and Envoy's normalisation, is
// either decided for the agent Envoy forwards it to, or refused — and with
// names and normalisation (deploy/envoy) none is refused.
func TestSecurityEnvoyRoutingDifferential(t *testing.T) {
	paths := []string{"/%6Byc/", "/kyc/../", "//kyc/", "/kyc%2F..", "/kyc/%2e%2e/", "/kyc/", "/"}
	hosts := []string{"kyc.example.", "KYC.example", "kyc.example", "kyc.example:10000", "other.example"}
	for _, layout := range []struct {
		name    string
		byHost  bool
		targets [][2]string // host, target
	}{
		{"two routes", false, nil},
		{"two hosts", true, nil},
	} {
		for _, p := range paths {
			if !layout.byHost {
				layout.targets = append(layout.targets, [2]string{"writ.test", p})
			}
		}
		for _, h := range hosts {
			if layout.byHost {
				layout.targets = append(layout.targets, [2]string{h, "/"})
			}
		}
		for _, named := range []bool{true, false} {
			rw := newRoutedWorld(t, layout.byHost, named)
			for _, normalize := range []bool{true, false} {
				for doorName, door := range rw.doors() {
					name := fmt.Sprintf("%s/%s/names=%v/normalize=%v", layout.name, doorName, named, normalize)
					t.Run(name, func(t *testing.T) {
						for _, target := range layout.targets {
							for _, c := range []caller{retailCaller, investigator} {
								got, agent := door(t, rw.envoy(named, normalize), c, target[1], target[0])
								want := denied
								if permitted(c, agent) {
									want = allowed
								}
								switch {
								case got == refused && named && normalize && agent != "":
									t.Errorf("Host %s %s (%s): refused, though Envoy normalised it and named %s", target[0], target[1], c.tenant, agent)
								case got != refused && agent == "":
									t.Errorf("Host %s %s (%s): %s, yet Envoy forwards it to no agent", target[0], target[1], c.tenant, got)
								case got != refused && got != want:
									t.Errorf("Host %s %s (%s): %s, but Envoy forwards it to %s, which %s it: decided for another agent",
										target[0], target[1], c.tenant, got, agent, map[verdict]string{allowed: "admits", denied: "refuses"}[want])
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestSecurityEnvoyRouteNameRequired — Threat: an Envoy route without
// writ's per-route name (a route added later, a virtual host copied
// without it) sends requests writ would route by its own reading of the
// target. Defence: with envoy.require_route_name (the default) such a
// request is refused, a name writ does not know is refused, and neither is
// ever re-derived from the path.
func TestSecurityEnvoyRouteNameRequired(t *testing.T) {
	rw := newRoutedWorld(t, false, true)
	doors := rw.doors()
	unnamed := rw.envoy(false, true)
	for name, door := range doors {
		if got, agent := door(t, unnamed, retailCaller, "/kyc/", "writ.test"); got != refused {
			t.Errorf("%s: a route without a name: %s (Envoy forwards to %s), want refused", name, got, agent)
		}
		wrong := rw.envoy(true, true)
		for i := range wrong.Routes {
			wrong.Routes[i].Name = "no-such-agent"
		}
		if got, agent := door(t, wrong, retailCaller, "/kyc/", "writ.test"); got != refused {
			t.Errorf("%s: a route naming an unknown agent: %s (Envoy forwards to %s), want refused", name, got, agent)
		}
	}
	// Through the same doors, a named route is decided (the control).
	for name, door := range doors {
		if got, _ := door(t, rw.envoy(true, true), retailCaller, "/kyc/", "writ.test"); got != allowed {
			t.Errorf("%s: named route: %s, want allowed", name, got)
		}
	}
}
