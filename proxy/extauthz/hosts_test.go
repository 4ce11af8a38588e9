package extauthz

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	"github.com/writ-authz/writ/proxy/extproc"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
	sidecardoor "github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/task"
)

// TestAgentsByHost: two agents on one listener, both at route "/", told apart
// by host only — in the sidecar, through gRPC ext_authz (:authority), through
// HTTP ext_authz (Host) and through ext_proc behind a test Envoy that routes
// by virtual host (:authority). Each door decides about the agent of the
// request's host (alpha serves the wholesale caller, beta does not), and a
// host neither serves is not found. A host in upper case is refused where
// writ itself routes on it (canonical form), and decided for the agent the
// route names behind Envoy.
func TestAgentsByHost(t *testing.T) {
	start := func(name string) *seedagents.Agent {
		a, err := seedagents.StartSanctions(seedagents.WithName(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	alpha, beta := start("alpha-agent"), start("beta-agent")
	idp, err := devidp.New(t.TempDir(), testIssuer, "writ")
	if err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: [../../policies]
identity:
  jwt: [{issuer: %s, audiences: [writ], jwks_file: %s}]
envoy: {grpc_listen: '127.0.0.1:0', http_listen: '127.0.0.1:0', require_route_name: false}
agents:
  - {name: alpha-agent, route: /, hosts: [alpha.agents.example], upstream: '%s', protocol: a2a,
     tenants: [wholesale], max_data_classification: restricted, security_schemes: [oauth2]}
  - {name: beta-agent, route: /, hosts: ['*.beta.example'], upstream: '%s', protocol: a2a,
     tenants: [retail], max_data_classification: restricted, security_schemes: [oauth2]}
`, testIssuer, idp.JWKSFile, alpha.URL, beta.URL)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ident.Close)
	pol, err := authz.LoadPolicy(context.Background(), cfg.Policies, authz.LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := authz.NewEngine(pol, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Logger: quiet,
		Store: task.NewMemoryStore(task.MemoryLimits{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	sidecar := httptest.NewServer(sidecardoor.New(core, cfg.Limits, quiet, nil))
	t.Cleanup(sidecar.Close)
	ext, err := New(core, ident, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ext.Shutdown(ctx)
	})
	w := &world{t: t, ext: ext, idp: idp}
	w.connect()
	proc, err := extproc.New(core, ident, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		proc.Shutdown(ctx)
	})
	conn, err := grpc.NewClient("passthrough:///"+proc.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	envoy := &extproctest.Envoy{Client: extprocv3.NewExternalProcessorClient(conn)}
	for _, a := range cfg.Agents {
		envoy.Routes = append(envoy.Routes, extproctest.Route{Hosts: a.Hosts, Prefix: a.Route, Name: a.Name, Upstream: a.Upstream})
	}
	viaEnvoy := httptest.NewServer(envoy)
	t.Cleanup(viaEnvoy.Close)
	tok := w.token(investigator)
	sends := func(a *seedagents.Agent) (n int) {
		for _, o := range a.Requests() {
			if o.Method == "message/send" {
				n++
			}
		}
		return n
	}
	// send posts a message to the door at base for host, as a client would.
	send := func(base, host string) (int, bool) {
		req, _ := http.NewRequest("POST", base+"/", bytesReader(sendBody("x")))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.StatusCode == 200
	}
	doors := map[string]func(host string) (status int, forwarded bool){
		"sidecar": func(host string) (int, bool) { return send(sidecar.URL, host) },
		"grpc": func(host string) (int, bool) {
			r := post("/", tok, sendBody("x"))
			cr := checkRequest(r)
			cr.Attributes.Request.Http.Host = host
			cr.Attributes.Request.Http.Headers[":authority"] = host
			a := checkAnswer(w.check(cr))
			return a.status, a.forwarded
		},
		"ext_proc": func(host string) (int, bool) { return send(viaEnvoy.URL, host) },
		"http":     func(host string) (int, bool) { return send("http://"+ext.HTTPAddr(), host) },
	}
	for name, door := range doors {
		t.Run(name, func(t *testing.T) {
			a0, b0 := sends(alpha), sends(beta)
			if st, fwd := door("alpha.agents.example:8443"); !fwd {
				t.Errorf("alpha's host: %d", st)
			}
			if st, fwd := door("api.beta.example"); fwd || st != 403 {
				t.Errorf("beta's host (not the caller's tenant): %d forwarded=%v", st, fwd)
			}
			// A host not in canonical form is refused where writ routes on it;
			// behind the test Envoy, the route names beta and beta decides.
			want := 400
			if name == "ext_proc" {
				want = 403
			}
			if st, fwd := door("Api.Beta.Example"); fwd || st != want {
				t.Errorf("beta's host in upper case: %d forwarded=%v, want %d", st, fwd, want)
			}
			if st, fwd := door("gamma.example"); fwd || st != 404 {
				t.Errorf("a host no agent serves: %d forwarded=%v", st, fwd)
			}
			if (name == "sidecar" || name == "ext_proc") && (sends(alpha) != a0+1 || sends(beta) != b0) {
				t.Errorf("the sidecar forwarded %d to alpha, %d to beta; want 1, 0", sends(alpha)-a0, sends(beta)-b0)
			}
		})
	}
}
