package metrics_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
)

const (
	testIssuer = "https://idp.test"
	sanctions  = "sanctions-screening-agent"
	deadAgent  = "dead-agent"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// world is a real writ core: the shipped policies (copied, so a test can reload
// a changed set), an engine, a reloader, an identity resolver trusting a JWKS file,
// a memory store and the config of two agents (the second one's upstream refuses
// connections).
type world struct {
	dir      string
	cfg      *config.Config
	engine   *authz.Engine
	reloader *authz.Reloader
	ident    *identity.Resolver
	store    *task.MemoryStore
	signer   jose.Signer
}

func newWorld(t testing.TB, upstream string) *world {
	t.Helper()
	w := &world{dir: t.TempDir()}
	policies := filepath.Join(w.dir, "policies")
	if err := os.Mkdir(policies, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("../policies")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".rego" && ext != ".json" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("../policies", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(policies, e.Name()), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	jwksFile := filepath.Join(w.dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	if w.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1")); err != nil {
		t.Fatal(err)
	}

	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
policies: [%s]
limits: {upstream_timeout: 5s, stream_idle_timeout: 5s}
identity:
  jwt: [{issuer: %s, audiences: [writ], jwks_file: %s}]
agents:
  - {name: %s, route: /, upstream: '%s', protocol: a2a, owner: group-compliance,
     tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2],
     skills: [{id: screen, tags: [sanctions, compliance]}]}
  - {name: %s, route: /dead, upstream: '%s', protocol: a2a, owner: group-compliance,
     tenants: [wholesale, retail], max_data_classification: restricted, security_schemes: [oauth2],
     skills: [{id: screen, tags: [sanctions, compliance]}]}
`, policies, testIssuer, jwksFile, sanctions, upstream, deadAgent, refusedURL(t))
	if w.cfg, err = config.Parse([]byte(yaml)); err != nil {
		t.Fatal(err)
	}
	if w.ident, err = identity.New(w.cfg.Identity); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.ident.Close)
	opt := authz.LoadOptions{SkipTests: true}
	pol, err := authz.LoadPolicy(context.Background(), w.cfg.Policies, opt)
	if err != nil {
		t.Fatal(err)
	}
	if w.engine, err = authz.NewEngine(pol, authz.Options{Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	w.reloader = authz.NewReloader(w.engine, w.cfg.Policies, opt, quiet())
	w.store = task.NewMemoryStore(task.MemoryLimits{MaxTasks: 1000, MaxPerOwner: 100, TTL: time.Hour})
	return w
}

// refusedURL is an http URL on 127.0.0.1 where nothing listens.
func refusedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// proxy builds the admission core over the world, observed by sink.
func (w *world) proxy(t testing.TB, sink events.Sink) *proxy.Core {
	t.Helper()
	px, err := proxy.New(w.cfg, proxy.Deps{Identity: w.ident, Engine: w.engine, Store: w.store, Logger: quiet(), Events: sink})
	if err != nil {
		t.Fatal(err)
	}
	return px
}

// token is an investigator's JWT, delegated through an orchestrator.
func (w *world) token(t testing.TB) string {
	t.Helper()
	claims := map[string]any{"iss": testIssuer, "aud": "writ", "sub": "u-42", "tenant": "wholesale", "scope": "delegate",
		"classification": "restricted", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
		"act": map[string]any{"sub": "payments-investigator", "act": map[string]any{"sub": "orchestrator"}}}
	tok, err := jwt.Signed(w.signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// sendBody is an A2A 0.3 JSON-RPC message/send.
func sendBody() []byte {
	raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{
		"message": map[string]any{"kind": "message", "messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user",
			"parts": []any{map[string]any{"kind": "text", "text": "screen this beneficiary"},
				map[string]any{"kind": "data", "data": map[string]any{"beneficiary": "Acme Trading FZE"}}}}}})
	return raw
}

// serveMetrics serves m's handler on a loopback test server.
func serveMetrics(t testing.TB, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// scrape is one parsed /metrics answer.
type scrape map[string]*dto.MetricFamily

// scrapeURL GETs url over HTTP and parses the text exposition.
func scrapeURL(t testing.TB, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// writ lists the writ_ families of the scrape, sorted.
func (s scrape) writ() []string {
	var out []string
	for name := range s {
		if strings.HasPrefix(name, "writ_") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// L is a series key: label pairs sorted by name, "a=x,b=y"; no pairs is "".
func L(kv ...string) string {
	var pairs []string
	for i := 0; i+1 < len(kv); i += 2 {
		pairs = append(pairs, kv[i]+"="+kv[i+1])
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func seriesKey(m *dto.Metric) string {
	var kv []string
	for _, lp := range m.GetLabel() {
		kv = append(kv, lp.GetName(), lp.GetValue())
	}
	return L(kv...)
}

// values maps each series of a family to its value: a counter's or gauge's
// value, a histogram's sample count.
func (s scrape) values(t testing.TB, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	f := s[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var v float64
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		default:
			t.Fatalf("%s: unexpected type %v", name, f.GetType())
		}
		out[seriesKey(m)] = v
	}
	return out
}

// sums maps each series of a histogram family to its sample sum.
func (s scrape) sums(name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s[name].GetMetric() {
		out[seriesKey(m)] = m.GetHistogram().GetSampleSum()
	}
	return out
}

// want asserts that the family has exactly the given series with exactly these
// values (histograms: sample counts), and the given type.
func (s scrape) want(t testing.TB, name string, typ dto.MetricType, want map[string]float64) {
	t.Helper()
	f := s[name]
	if f == nil {
		t.Errorf("%s: not in the scrape", name)
		return
	}
	if f.GetType() != typ {
		t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
	}
	if f.GetHelp() == "" {
		t.Errorf("%s: no help text", name)
	}
	got := s.values(t, name)
	for _, k := range sortedKeys(got, want) {
		g, gok := got[k]
		w, wok := want[k]
		switch {
		case !gok:
			t.Errorf("%s{%s}: missing, want %v", name, k, w)
		case !wok:
			t.Errorf("%s{%s} = %v: unexpected series", name, k, g)
		case g != w:
			t.Errorf("%s{%s} = %v, want %v", name, k, g, w)
		}
	}
}

// wantSums asserts a histogram's sample sums, to within float rounding.
func (s scrape) wantSums(t testing.TB, name string, want map[string]float64) {
	t.Helper()
	got := s.sums(name)
	for _, k := range sortedKeys(got, want) {
		if g, w := got[k], want[k]; math.Abs(g-w) > 1e-9 {
			t.Errorf("%s{%s} sum = %v, want %v", name, k, g, w)
		}
	}
}

func sortedKeys(a, b map[string]float64) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// labelNames lists the label names a family's series carry.
func (s scrape) labelNames(name string) []string {
	seen := map[string]bool{}
	for _, m := range s[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			seen[lp.GetName()] = true
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
