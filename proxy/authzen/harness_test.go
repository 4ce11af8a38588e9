package authzen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy/authzen"
	"github.com/writ-authz/writ/task"
)

// The world of these tests: writ (the core, the sidecar door) in front of
// three fake A2A 1.0 agents on loopback, with the test identity provider
// signing real JWTs, the shipped policies and, beside them, the AuthZEN
// applications of testdata/authzen/policies; the AuthZEN door on a
// listener of its own over that core and engine.

// testdata is the AuthZEN test data (interop vectors, policies).
var testdata = filepath.Join(proxytest.Root(), "testdata", "authzen")

// gateway is the enforcement point the tests ask as (authzen.clients).
var gateway = proxytest.Caller{Agent: "gateway", User: "svc-gateway", Tenant: "platform"}

type world struct {
	t   *testing.T
	h   *proxytest.Harness
	pdp *authzen.Server
	// ident is the identity resolver of the doors the world starts.
	ident *identity.Resolver
	// base is the door's URL; pep the gateway's bearer token.
	base, pep string
	agent     *proxytest.FakeAgent
	logw      *lockedWriter
	client    *http.Client
}

// agents are the protected agents: the sanctions agent (every tenant,
// restricted data), a wholesale-only ledger that takes confidential data
// at most, and a legacy agent that accepts API keys only.
func agents(upstream string) []config.Agent {
	sanctions := proxytest.SanctionsAgent(upstream)
	sanctions.Route = "/sanctions/"
	return []config.Agent{sanctions,
		{Name: "wholesale-ledger", Route: "/ledger/", Upstream: upstream, Protocol: "a2a", Owner: "treasury",
			Tenants: []string{"wholesale"}, MaxDataClassification: task.Confidential, SecuritySchemes: []string{"oauth2"}},
		{Name: "legacy-agent", Route: "/legacy/", Upstream: upstream, Protocol: "a2a", Owner: "ops",
			MaxDataClassification: task.Restricted, SecuritySchemes: []string{"apikey"}},
	}
}

// newWorld builds the world; mutate adjusts the config (nil: none).
func newWorld(t *testing.T, mutate func(*config.Config)) *world {
	t.Helper()
	var n atomic.Int64
	agent := proxytest.NewFakeAgent(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		// Every send starts a task of its own, completed at once.
		id := n.Add(1)
		w.Header().Set("Content-Type", "application/a2a+json")
		_, _ = fmt.Fprintf(w, `{"task":{"id":"task-%d","contextId":"ctx-%d","status":{"state":"TASK_STATE_COMPLETED"}}}`, id, id)
	})
	h := proxytest.New(t, agents(agent.Srv.URL), func(c *config.Config) {
		c.Policies = append(c.Policies, filepath.Join(testdata, "policies"))
		// The defaults (max_evaluations, page_size, ...) are applied already.
		c.AuthZEN.Listen, c.AuthZEN.Clients = "127.0.0.1:0", []string{gateway.Agent}
		c.AuthZEN.Applications = []config.AuthZENApplication{{Name: "todo", Package: "todo"},
			{Name: "searchdemo", Package: "searchdemo"}, {Name: "certification", Package: "certification"},
			{Name: "spec", Package: "specexamples"}}
		if mutate != nil {
			mutate(c)
		}
	})
	w := &world{t: t, h: h, agent: agent, logw: &lockedWriter{w: &bytes.Buffer{}}, client: &http.Client{Timeout: 30 * time.Second}}
	w.pdp = w.door(nil)
	w.base = "http://" + w.pdp.Addr()
	w.pep = h.Token(gateway)
	return w
}

// door starts an AuthZEN door over the world's core and engine.
func (w *world) door(opt *authzen.Options) *authzen.Server {
	w.t.Helper()
	if w.ident == nil {
		ident, err := identity.New(w.h.Cfg.Identity)
		if err != nil {
			w.t.Fatal(err)
		}
		w.t.Cleanup(ident.Close)
		w.ident = ident
	}
	o := authzen.Options{Logger: slog.New(slog.NewJSONHandler(w.logw, nil))}
	if opt != nil {
		o.TLS = opt.TLS
	}
	s, err := authzen.New(w.h.Core, rulesOf(w.h.Engine), w.ident, w.h.Cfg, o)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			w.t.Errorf("the AuthZEN door's shutdown: %v", err)
		}
	})
	return s
}

// rulesOf is the engine's rules as the door takes them: the assembly's glue.
func rulesOf(e *authz.Engine) authzen.Rules {
	return authzen.RulesFunc(func(ref string) (authzen.Rule, error) {
		q, err := e.Prepare(ref)
		if err != nil {
			return nil, err
		}
		return q, nil
	})
}

// lockedWriter serializes the log's writes (handlers may write from several
// goroutines).
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logged reports whether the door's log holds s.
func (w *world) logged(s string) bool {
	lw := w.logw
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return strings.Contains(lw.w.String(), s)
}

// answer is one response of the door.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the answer's body.
func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(a.body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("status %d, body %q: %v", a.status, a.body, err)
	}
	return m
}

// post sends body (bytes, a string, or a value to encode) to path of the
// door as the gateway.
func (w *world) post(path string, body any) answer {
	w.t.Helper()
	return w.do(http.MethodPost, path, body, map[string]string{"Authorization": "Bearer " + w.pep,
		"Content-Type": "application/json"})
}

// do sends one request to the door.
func (w *world) do(method, path string, body any, hdr map[string]string) answer {
	w.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	target := w.base + path
	if strings.HasPrefix(path, "http") {
		target = path // a whole URL
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}
}

// raw parses a JSON text written in a test.
func raw(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return m
}
