// Package envoy holds the Envoy deployment examples (ext_proc, gRPC and HTTP
// ext_authz); this test keeps them honest without an Envoy binary: each YAML
// is decoded into Envoy's own v3 protos (unknown fields and wrong types fail),
// validated with the protos' generated rules, and checked against writ.yaml
// beside it.
package envoy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy/envoyreq"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/proxy/extproc"
)

// loadWrit loads writ.yaml exactly as `writ validate` does: config keys, identity
// sources, policies compiled and their tests run.
func loadWrit(t *testing.T) *config.Config { return loadWritFile(t, "writ.yaml") }

// writFor is the writ config an Envoy file here is written against.
func writFor(t *testing.T, envoyFile string) *config.Config {
	if strings.HasSuffix(envoyFile, "envoy-grpc.yaml") {
		return loadWritFile(t, "writ-grpc.yaml")
	}
	return loadWrit(t)
}

// loadWritFile loads one of the writ configs here (loadWrit).
func loadWritFile(t *testing.T, file string) *config.Config {
	t.Helper()
	here, _ := os.Getwd()
	if filepath.Base(here) != "envoy" {
		here = filepath.Join(here, "deploy", "envoy") // a second load, from the root
	}
	// The other files' paths are the repository root's; writ.yaml's are
	// relative to its own directory, read from there.
	t.Chdir(filepath.Join(here, "../.."))
	cfg, err := config.Load(filepath.Join(here, file))
	if err != nil {
		t.Fatal(err)
	}
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		t.Fatal(err)
	}
	ident.Close()
	if _, err := authz.LoadPolicy(context.Background(), cfg.Policies, authz.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if !cfg.Envoy.Enabled() || len(cfg.Agents) != 1 {
		t.Fatalf("%s: want an ext_authz listener and one agent: %+v", file, cfg.Envoy)
	}
	return cfg
}

// loadEnvoy decodes an Envoy YAML into the bootstrap proto and validates it.
func loadEnvoy(t *testing.T, name string) *bootstrapv3.Bootstrap {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("%s is not an Envoy v3 bootstrap: %v", name, err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &b
}

// envoyParts are the pieces of a bootstrap the checks read.
type envoyParts struct {
	listener *listenerv3.Listener
	hcm      *hcmv3.HttpConnectionManager
	extAuthz *extauthzv3.ExtAuthz
	extProc  *extprocv3.ExternalProcessor
	jwt      *jwtv3.JwtAuthentication
	clusters map[string]*clusterv3.Cluster
	filters  []string
}

func parts(t *testing.T, b *bootstrapv3.Bootstrap) envoyParts {
	t.Helper()
	p := envoyParts{clusters: map[string]*clusterv3.Cluster{}}
	for _, c := range b.GetStaticResources().GetClusters() {
		p.clusters[c.GetName()] = c
	}
	ls := b.GetStaticResources().GetListeners()
	if len(ls) != 1 || len(ls[0].GetFilterChains()) != 1 || len(ls[0].GetFilterChains()[0].GetFilters()) != 1 {
		t.Fatal("want one listener with one filter chain and one network filter")
	}
	p.listener = ls[0]
	p.hcm = &hcmv3.HttpConnectionManager{}
	unpack(t, ls[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), p.hcm)
	for _, f := range p.hcm.GetHttpFilters() {
		p.filters = append(p.filters, f.GetName())
		switch f.GetName() {
		case "envoy.filters.http.ext_authz":
			p.extAuthz = &extauthzv3.ExtAuthz{}
			unpack(t, f.GetTypedConfig(), p.extAuthz)
		case "envoy.filters.http.ext_proc":
			p.extProc = &extprocv3.ExternalProcessor{}
			unpack(t, f.GetTypedConfig(), p.extProc)
		case "envoy.filters.http.jwt_authn":
			p.jwt = &jwtv3.JwtAuthentication{}
			unpack(t, f.GetTypedConfig(), p.jwt)
		}
	}
	if p.extAuthz == nil && p.extProc == nil {
		t.Fatal("neither an ext_authz nor an ext_proc filter")
	}
	return p
}

// unpack opens a typed_config and validates it with its generated rules.
func unpack(t *testing.T, a interface {
	MessageIs(proto.Message) bool
	UnmarshalTo(proto.Message) error
}, m interface {
	proto.Message
	ValidateAll() error
}) {
	t.Helper()
	if !a.MessageIs(m) {
		t.Fatalf("typed_config is not a %T", m)
	}
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatal(err)
	}
	if err := m.ValidateAll(); err != nil {
		t.Fatalf("%T: %v", m, err)
	}
}

// port is the single endpoint port of a cluster.
func (p envoyParts) port(t *testing.T, cluster string) (host string, port int) {
	t.Helper()
	c := p.clusters[cluster]
	eps := c.GetLoadAssignment().GetEndpoints()
	if c == nil || len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		t.Fatalf("cluster %q: want one endpoint", cluster)
	}
	sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	return sa.GetAddress(), int(sa.GetPortValue())
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// checkCommon: the filter order, fail-closed, the route and the agent cluster,
// and the body settings.
func checkCommon(t *testing.T, p envoyParts, cfg *config.Config) {
	t.Helper()
	if p.extAuthz == nil {
		t.Fatal("no ext_authz filter")
	}
	checkRoute(t, p, cfg)
	ea := p.extAuthz
	if ea.GetFailureModeAllow() || ea.GetTransportApiVersion().String() != "V3" {
		t.Errorf("ext_authz must fail closed and speak V3: %v", ea)
	}
	body := ea.GetWithRequestBody()
	if int64(body.GetMaxRequestBytes()) != cfg.Envoy.BodyLimit(cfg.Limits) || !body.GetAllowPartialMessage() {
		t.Errorf("with_request_body %v, writ envoy.max_request_bytes %d", body, cfg.Envoy.BodyLimit(cfg.Limits))
	}
}

// checkRoute: the router comes last; the route, the agent's cluster and its
// public host are writ's agents[0]; the request is normalised and every route
// names its agent (routingProblems).
func checkRoute(t *testing.T, p envoyParts, cfg *config.Config) {
	t.Helper()
	if p.filters[len(p.filters)-1] != "envoy.filters.http.router" {
		t.Errorf("filters %v: the router must come last", p.filters)
	}
	for _, problem := range routingProblems(p, cfg) {
		t.Error(problem)
	}
	agent := cfg.Agents[0]
	vhs := p.hcm.GetRouteConfig().GetVirtualHosts()
	if len(vhs) != 1 || len(vhs[0].GetRoutes()) != 1 {
		t.Fatal("want one virtual host with one route")
	}
	rt := vhs[0].GetRoutes()[0]
	if routeMatch(rt) != agent.Route {
		t.Errorf("route prefix %q, writ agents[0].route %q", routeMatch(rt), agent.Route)
	}
	u, _ := url.Parse(agent.Upstream)
	wantHost, wantPort := hostPort(t, u.Host)
	if host, port := p.port(t, rt.GetRoute().GetCluster()); host != wantHost || port != wantPort {
		t.Errorf("agent cluster %s:%d, writ agents[0].upstream %s", host, port, agent.Upstream)
	}
	if pub, _ := url.Parse(agent.PublicURL); !slices.Contains(vhs[0].GetDomains(), pub.Host) {
		t.Errorf("domains %v miss the agent's public host %s", vhs[0].GetDomains(), pub.Host)
	}
}

// routeMatch is the agent route an Envoy route matches: prefix "/", or a
// path_separated_prefix (a plain prefix "/kyc" would also match "/kycx",
// which writ does not read as /kyc's); "" for any other match.
func routeMatch(rt *routev3.Route) string {
	m := rt.GetMatch()
	switch {
	case m.GetPrefix() == "/":
		return "/"
	case m.GetPathSeparatedPrefix() != "":
		return m.GetPathSeparatedPrefix()
	}
	return ""
}

// routingProblems lists what lets Envoy and writ disagree on the agent of a
// request (docs/envoy.md): the connection manager must normalise the
// path and host; every virtual host must match its domains on any port (writ
// ignores the port); every route must match a writ route plainly and name
// its agent to writ — writ-agent in the ext_authz context_extensions, in the
// HTTP check's headers, or in the ext_proc stream's initial metadata — and
// never turn writ's filter off; nothing may re-route a request writ decided;
// and writ must refuse a request whose route names no agent.
func routingProblems(p envoyParts, cfg *config.Config) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	h := p.hcm
	if !h.GetNormalizePath().GetValue() || !h.GetMergeSlashes() || !h.GetStripTrailingHostDot() ||
		h.GetPathWithEscapedSlashesAction() != hcmv3.HttpConnectionManager_REJECT_REQUEST {
		bad("http_connection_manager must set normalize_path, merge_slashes, strip_trailing_host_dot and path_with_escaped_slashes_action: REJECT_REQUEST (got %v, %v, %v, %v)",
			h.GetNormalizePath().GetValue(), h.GetMergeSlashes(), h.GetStripTrailingHostDot(), h.GetPathWithEscapedSlashesAction())
	}
	if !cfg.Envoy.RequiresRouteName() {
		bad("writ.yaml: envoy.require_route_name must stay on")
	}
	if ea := p.extAuthz; ea != nil {
		if ea.GetClearRouteCache() {
			bad("ext_authz clear_route_cache: Envoy would re-route the request writ decided")
		}
		for _, m := range ea.GetAllowedHeaders().GetPatterns() {
			if matches(m, envoyreq.RouteKey) {
				bad("ext_authz allowed_headers %v pass a client's own %s header", m, envoyreq.RouteKey)
			}
		}
	}
	if ep := p.extProc; ep != nil && ep.GetRouteCacheAction() != extprocv3.ExternalProcessor_RETAIN {
		bad("ext_proc route_cache_action %v: want RETAIN (nothing re-routes the request writ decided)", ep.GetRouteCacheAction())
	}
	rc := h.GetRouteConfig()
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			if !strings.Contains(d, ":") && d != "*" && !rc.GetIgnorePortInHostMatching() && !slices.Contains(vh.GetDomains(), d+":*") {
				bad("virtual host %s: domain %s without %s:* (writ ignores the port)", vh.GetName(), d, d)
			}
		}
		for i, rt := range vh.GetRoutes() {
			where := fmt.Sprintf("virtual host %s, route %d", vh.GetName(), i)
			name := routeName(p, rt, bad, where)
			if name == "" {
				bad("%s names no agent to writ (%s)", where, envoyreq.RouteKey)
				continue
			}
			a, ok := cfg.Agent(name)
			switch {
			case !ok:
				bad("%s names %q, which is no agent of writ.yaml", where, name)
			case routeMatch(rt) != a.Route:
				bad("%s matches %q, but agent %s's route is %q (use prefix / or path_separated_prefix)", where, routeMatch(rt), name, a.Route)
			}
		}
	}
	return out
}

// routeName is the agent a route names to writ through the filter p runs.
func routeName(p envoyParts, rt *routev3.Route, bad func(string, ...any), where string) string {
	var name string
	if p.extAuthz != nil {
		per := &extauthzv3.ExtAuthzPerRoute{}
		if !openPerRoute(rt, "envoy.filters.http.ext_authz", per) {
			return ""
		}
		if per.GetDisabled() {
			bad("%s disables ext_authz", where)
		}
		cs := per.GetCheckSettings()
		name = cs.GetContextExtensions()[envoyreq.RouteKey]
		if hs := p.extAuthz.GetHttpService(); hs != nil {
			o := cs.GetHttpService()
			name = ""
			for _, hv := range o.GetAuthorizationRequest().GetHeadersToAdd() {
				if hv.GetKey() == envoyreq.RouteKey {
					name = hv.GetValue()
				}
			}
			if o.GetServerUri().GetCluster() != hs.GetServerUri().GetCluster() || o.GetPathPrefix() != hs.GetPathPrefix() ||
				!proto.Equal(o.GetAuthorizationResponse(), hs.GetAuthorizationResponse()) {
				bad("%s: its http_service override must repeat the filter's (cluster, path_prefix, authorization_response)", where)
			}
		}
	}
	if p.extProc != nil {
		per := &extprocv3.ExtProcPerRoute{}
		if !openPerRoute(rt, "envoy.filters.http.ext_proc", per) {
			return ""
		}
		if per.GetDisabled() {
			bad("%s disables ext_proc", where)
		}
		for _, hv := range per.GetOverrides().GetGrpcInitialMetadata() {
			if hv.GetKey() == envoyreq.RouteKey {
				name = hv.GetValue()
			}
		}
	}
	return name
}

// openPerRoute reads a route's typed_per_filter_config for filter into m.
func openPerRoute(rt *routev3.Route, filter string, m proto.Message) bool {
	a := rt.GetTypedPerFilterConfig()[filter]
	return a != nil && a.MessageIs(m) && a.UnmarshalTo(m) == nil
}

// matches reports whether an Envoy string matcher accepts s.
func matches(m *matcherv3.StringMatcher, s string) bool {
	v := func(x string) string {
		if m.GetIgnoreCase() {
			return strings.ToLower(x)
		}
		return x
	}
	switch {
	case m.GetExact() != "":
		return v(m.GetExact()) == v(s)
	case m.GetPrefix() != "":
		return strings.HasPrefix(v(s), v(m.GetPrefix()))
	case m.GetSuffix() != "":
		return strings.HasSuffix(v(s), v(m.GetSuffix()))
	case m.GetContains() != "":
		return strings.Contains(v(s), v(m.GetContains()))
	case m.GetSafeRegex() != nil:
		re, err := regexp.Compile(m.GetSafeRegex().GetRegex())
		return err != nil || re.MatchString(s)
	}
	return true // a matcher this test cannot read is taken to match
}

// TestRoutingChecks: the routing checks above reject what they must — a
// route that names no agent, or an unknown one, a config without Envoy's
// normalisation — in each file, so a shipped file cannot lose either
// unnoticed.
func TestRoutingChecks(t *testing.T) {
	for _, f := range []string{"deploy/envoy/envoy.yaml", "deploy/envoy/envoy-http.yaml", "deploy/envoy/envoy-extproc.yaml", "deploy/envoy/envoy-grpc.yaml"} {
		cfg := writFor(t, f)
		for what, spoil := range map[string]func(p envoyParts){
			"names no agent": func(p envoyParts) {
				p.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].TypedPerFilterConfig = nil
			},
			"which is no agent": func(p envoyParts) {
				rt := p.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
				for k, a := range rt.GetTypedPerFilterConfig() {
					var m proto.Message = &extauthzv3.ExtAuthzPerRoute{}
					if p.extProc != nil {
						m = &extprocv3.ExtProcPerRoute{}
					}
					if err := a.UnmarshalTo(m); err != nil {
						t.Fatal(err)
					}
					raw, _ := protojson.Marshal(m)
					raw = []byte(strings.ReplaceAll(string(raw), cfg.Agents[0].Name, "another-agent"))
					if err := protojson.Unmarshal(raw, m); err != nil {
						t.Fatal(err)
					}
					if err := a.MarshalFrom(m); err != nil {
						t.Fatal(err)
					}
					rt.TypedPerFilterConfig[k] = a
				}
			},
			"normalize_path": func(p envoyParts) { p.hcm.NormalizePath = nil },
			"merge_slashes":  func(p envoyParts) { p.hcm.MergeSlashes = false },
			"REJECT_REQUEST": func(p envoyParts) {
				p.hcm.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_KEEP_UNCHANGED
			},
			"strip_trailing_host_dot": func(p envoyParts) { p.hcm.StripTrailingHostDot = false },
			"use prefix / or path_separated_prefix": func(p envoyParts) {
				p.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].Match.PathSpecifier = &routev3.RouteMatch_Path{Path: "/"}
			},
		} {
			p := parts(t, loadEnvoy(t, f))
			if got := routingProblems(p, cfg); len(got) != 0 {
				t.Fatalf("%s as shipped: %v", f, got)
			}
			spoil(p)
			got := strings.Join(routingProblems(p, cfg), "\n")
			if !strings.Contains(got, what) {
				t.Errorf("%s spoilt (%s): the checks found %q", f, what, got)
			}
		}
	}
}

// TestGRPCMode: envoy.yaml sends gRPC checks to writ's envoy.grpc_listen over
// HTTP/2, with the body as bytes, and the jwt_authn claims writ trusts.
func TestGRPCMode(t *testing.T) {
	cfg := loadWrit(t)
	checkGRPCMode(t, parts(t, loadEnvoy(t, "deploy/envoy/envoy.yaml")), cfg)
}

// TestGRPCCallMode: envoy-grpc.yaml fronts an agent served over gRPC
// (writ-grpc.yaml): gRPC ext_authz as envoy.yaml has it, the call's frame
// as raw_body (pack_as_bytes, which writ reads the one message from), a
// body writ parses, the agent on route / (the path is the method) and its
// cluster speaking HTTP/2.
func TestGRPCCallMode(t *testing.T) {
	cfg := loadWritFile(t, "writ-grpc.yaml")
	p := parts(t, loadEnvoy(t, "deploy/envoy/envoy-grpc.yaml"))
	checkGRPCMode(t, p, cfg)
	a := cfg.Agents[0]
	if a.Protocol != "a2a-grpc" || a.Route != "/" || !cfg.Envoy.ParsesBody() || cfg.Envoy.AllowPartialBody {
		t.Errorf("writ-grpc.yaml: agent %s protocol %q route %q, parse_body %v, allow_partial_body %v",
			a.Name, a.Protocol, a.Route, cfg.Envoy.ParsesBody(), cfg.Envoy.AllowPartialBody)
	}
	rt := p.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0]
	opts := &httpv3.HttpProtocolOptions{}
	unpack(t, p.clusters[rt.GetRoute().GetCluster()].GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"], opts)
	if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("the agent's cluster %s must speak HTTP/2 (gRPC)", rt.GetRoute().GetCluster())
	}
	if rt.GetRoute().GetTimeout().AsDuration() != 0 {
		t.Errorf("route timeout %v cuts server streams", rt.GetRoute().GetTimeout().AsDuration())
	}
}

// checkGRPCMode: the ext_authz filter of p sends gRPC checks to cfg's
// envoy.grpc_listen over HTTP/2, with the body as bytes, and the jwt_authn
// claims writ trusts.
func checkGRPCMode(t *testing.T, p envoyParts, cfg *config.Config) {
	t.Helper()
	checkCommon(t, p, cfg)
	ea := p.extAuthz
	cluster := ea.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	wantHost, wantPort := hostPort(t, cfg.Envoy.GRPCListen)
	if host, port := p.port(t, cluster); host != wantHost || port != wantPort {
		t.Errorf("cluster %s at %s:%d, writ envoy.grpc_listen %s", cluster, host, port, cfg.Envoy.GRPCListen)
	}
	opts := &httpv3.HttpProtocolOptions{}
	unpack(t, p.clusters[cluster].GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"], opts)
	if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("cluster %s must speak HTTP/2 (gRPC)", cluster)
	}
	if hc := p.clusters[cluster].GetHealthChecks(); len(hc) != 1 || hc[0].GetGrpcHealthCheck().GetServiceName() != "envoy.service.auth.v3.Authorization" {
		t.Errorf("health check %v", hc)
	}
	if to := ea.GetGrpcService().GetTimeout().AsDuration(); to <= 0 || to > 5e9 {
		t.Errorf("ext_authz timeout %v", to)
	}
	if !ea.GetWithRequestBody().GetPackAsBytes() || !ea.GetIncludePeerCertificate() {
		t.Errorf("gRPC mode sends raw_body and the peer certificate: %v", ea)
	}
	// jwt_authn: before ext_authz, its namespace forwarded, its issuers trusted.
	j := cfg.Envoy.JWTAuthn
	if p.jwt == nil || j == nil || slices.Index(p.filters, "envoy.filters.http.jwt_authn") > slices.Index(p.filters, "envoy.filters.http.ext_authz") {
		t.Fatalf("jwt_authn must run before ext_authz: %v", p.filters)
	}
	if !slices.Contains(ea.GetMetadataContextNamespaces(), j.Namespace) {
		t.Errorf("metadata_context_namespaces %v miss %s", ea.GetMetadataContextNamespaces(), j.Namespace)
	}
	for name, prov := range p.jwt.GetProviders() {
		if prov.GetPayloadInMetadata() == "" || !slices.Contains(j.Issuers, prov.GetIssuer()) {
			t.Errorf("provider %s: issuer %q must be in writ envoy.jwt_authn.issuers and put its payload in metadata", name, prov.GetIssuer())
		}
		if _, ok := p.clusters[prov.GetRemoteJwks().GetHttpUri().GetCluster()]; !ok {
			t.Errorf("provider %s: no cluster %q", name, prov.GetRemoteJwks().GetHttpUri().GetCluster())
		}
	}
}

// TestHTTPMode: envoy-http.yaml sends checks to writ's envoy.http_listen under
// envoy.http_path_prefix, forwards exactly the headers writ reads (the
// protocol table's, extauthz.RequestHeaders), and copies writ's upstream
// headers.
func TestHTTPMode(t *testing.T) {
	cfg := loadWrit(t)
	p := parts(t, loadEnvoy(t, "deploy/envoy/envoy-http.yaml"))
	checkCommon(t, p, cfg)
	hs := p.extAuthz.GetHttpService()
	if hs == nil {
		t.Fatal("no http_service")
	}
	wantHost, wantPort := hostPort(t, cfg.Envoy.HTTPListen)
	if host, port := p.port(t, hs.GetServerUri().GetCluster()); host != wantHost || port != wantPort {
		t.Errorf("cluster %s at %s:%d, writ envoy.http_listen %s", hs.GetServerUri().GetCluster(), host, port, cfg.Envoy.HTTPListen)
	}
	if u, err := url.Parse(hs.GetServerUri().GetUri()); err != nil || u.Host != cfg.Envoy.HTTPListen {
		t.Errorf("server_uri %s, writ envoy.http_listen %s", hs.GetServerUri().GetUri(), cfg.Envoy.HTTPListen)
	}
	if hs.GetPathPrefix() != cfg.Envoy.HTTPPathPrefix {
		t.Errorf("path_prefix %q, writ envoy.http_path_prefix %q", hs.GetPathPrefix(), cfg.Envoy.HTTPPathPrefix)
	}
	if p.extAuthz.GetWithRequestBody().GetPackAsBytes() {
		t.Error("pack_as_bytes: http_service would send no body")
	}
	var allowed, upstream []string
	for _, m := range p.extAuthz.GetAllowedHeaders().GetPatterns() {
		allowed = append(allowed, m.GetExact())
	}
	for _, m := range hs.GetAuthorizationResponse().GetAllowedUpstreamHeaders().GetPatterns() {
		upstream = append(upstream, m.GetExact())
	}
	want := extauthz.RequestHeaders()
	for _, h := range want {
		if !slices.Contains(allowed, h) {
			t.Errorf("allowed_headers %v miss %s, which writ reads", allowed, h)
		}
	}
	for _, h := range allowed {
		if !slices.Contains(want, h) {
			t.Errorf("allowed_headers %v pass %s, which no protocol of writ's table reads (want exactly %v)", allowed, h, want)
		}
	}
	for _, h := range []string{"writ-caller", "writ-decision-id"} {
		if !slices.Contains(upstream, h) {
			t.Errorf("allowed_upstream_headers %v miss %s", upstream, h)
		}
	}
}

// TestEveryFile: every Envoy file here decodes into Envoy's own v3 bootstrap
// and passes its validation rules, and names writ's clusters at writ's
// listeners (a new file cannot escape the checks below).
func TestEveryFile(t *testing.T) {
	loadWrit(t) // from the root, as the rest
	files, _ := filepath.Glob("deploy/envoy/envoy*.yaml")
	if len(files) < 4 {
		t.Fatalf("only %v", files)
	}
	for _, f := range files {
		p := parts(t, loadEnvoy(t, f))
		checkRoute(t, p, writFor(t, f))
		if p.extAuthz != nil && p.extProc != nil {
			t.Errorf("%s runs ext_authz and ext_proc: ext_proc alone decides and sees answers (docs/envoy.md)", f)
		}
	}
}

// TestExtProcMode: envoy-extproc.yaml streams each request and its answer to
// writ's envoy.ext_proc_listen with the modes writ needs, fails closed,
// never ignores writ's immediate responses, allows the one mode override
// writ asks for, forwards the jwt_authn claims and the attributes writ reads,
// and buffers no more than writ accepts.
func TestExtProcMode(t *testing.T) {
	cfg := loadWrit(t)
	p := parts(t, loadEnvoy(t, "deploy/envoy/envoy-extproc.yaml"))
	checkRoute(t, p, cfg)
	ep := p.extProc
	if ep == nil {
		t.Fatal("no ext_proc filter")
	}
	cluster := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	wantHost, wantPort := hostPort(t, cfg.Envoy.ExtProcListen)
	if host, port := p.port(t, cluster); host != wantHost || port != wantPort {
		t.Errorf("cluster %s at %s:%d, writ envoy.ext_proc_listen %s", cluster, host, port, cfg.Envoy.ExtProcListen)
	}
	opts := &httpv3.HttpProtocolOptions{}
	unpack(t, p.clusters[cluster].GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"], opts)
	if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("cluster %s must speak HTTP/2 (gRPC)", cluster)
	}
	if hc := p.clusters[cluster].GetHealthChecks(); len(hc) != 1 || hc[0].GetGrpcHealthCheck().GetServiceName() != "envoy.service.ext_proc.v3.ExternalProcessor" {
		t.Errorf("health check %v", hc)
	}
	// Fail closed: writ down, slow or refusing is a refusal.
	if ep.GetFailureModeAllow() || ep.GetDisableImmediateResponse() || ep.GetObservabilityMode() {
		t.Errorf("ext_proc must fail closed and act on writ's answers: failure_mode_allow %v, disable_immediate_response %v, observability_mode %v",
			ep.GetFailureModeAllow(), ep.GetDisableImmediateResponse(), ep.GetObservabilityMode())
	}
	if to := ep.GetMessageTimeout().AsDuration(); to <= 0 || to > 5e9 {
		t.Errorf("message_timeout %v", to)
	}
	// The phases writ needs: request headers and the whole body; answers'
	// headers and every body, STREAMED (SSE live) or BUFFERED.
	m := ep.GetProcessingMode()
	if m.GetRequestHeaderMode() == extprocv3.ProcessingMode_SKIP || m.GetResponseHeaderMode() == extprocv3.ProcessingMode_SKIP ||
		m.GetRequestBodyMode() != extprocv3.ProcessingMode_BUFFERED ||
		(m.GetResponseBodyMode() != extprocv3.ProcessingMode_STREAMED && m.GetResponseBodyMode() != extprocv3.ProcessingMode_BUFFERED) {
		t.Errorf("processing_mode %v", m)
	}
	if ep.GetSendBodyWithoutWaitingForHeaderResponse() {
		t.Error("send_body_without_waiting_for_header_response disables mode overrides")
	}
	// The override writ asks for: the other response body mode.
	want := extprocv3.ProcessingMode_BUFFERED
	if m.GetResponseBodyMode() == extprocv3.ProcessingMode_BUFFERED {
		want = extprocv3.ProcessingMode_STREAMED
	}
	allowed := false
	for _, o := range ep.GetAllowedOverrideModes() {
		allowed = allowed || (o.GetResponseBodyMode() == want && o.GetRequestBodyMode() == m.GetRequestBodyMode() &&
			o.GetRequestTrailerMode() == m.GetRequestTrailerMode() && o.GetResponseHeaderMode() == m.GetResponseHeaderMode() &&
			o.GetResponseTrailerMode() == m.GetResponseTrailerMode())
	}
	if !ep.GetAllowModeOverride() || (len(ep.GetAllowedOverrideModes()) > 0 && !allowed) {
		t.Errorf("allow_mode_override %v, allowed_override_modes %v: writ asks for response_body_mode %v", ep.GetAllowModeOverride(),
			ep.GetAllowedOverrideModes(), want)
	}
	for _, a := range []string{extproc.AttrSourceAddress, extproc.AttrPeerURISAN} {
		if !slices.Contains(ep.GetRequestAttributes(), a) {
			t.Errorf("request_attributes %v miss %s, which writ reads", ep.GetRequestAttributes(), a)
		}
	}
	if !slices.Contains(ep.GetResponseAttributes(), extproc.AttrCodeDetails) {
		t.Errorf("response_attributes %v miss %s, which writ reads", ep.GetResponseAttributes(), extproc.AttrCodeDetails)
	}
	// jwt_authn: before ext_proc, its namespace forwarded, its issuers trusted.
	j := cfg.Envoy.JWTAuthn
	if p.jwt == nil || j == nil || slices.Index(p.filters, "envoy.filters.http.jwt_authn") > slices.Index(p.filters, "envoy.filters.http.ext_proc") {
		t.Fatalf("jwt_authn must run before ext_proc: %v", p.filters)
	}
	if ns := ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(); !slices.Contains(ns, j.Namespace) {
		t.Errorf("metadata_options.forwarding_namespaces.untyped %v miss %s", ns, j.Namespace)
	}
	for name, prov := range p.jwt.GetProviders() {
		if prov.GetPayloadInMetadata() == "" || !slices.Contains(j.Issuers, prov.GetIssuer()) {
			t.Errorf("provider %s: issuer %q must be in writ envoy.jwt_authn.issuers and put its payload in metadata", name, prov.GetIssuer())
		}
	}
	// What Envoy buffers is what writ accepts.
	if got := int64(p.listener.GetPerConnectionBufferLimitBytes().GetValue()); got != cfg.Envoy.BodyLimit(cfg.Limits) {
		t.Errorf("listener per_connection_buffer_limit_bytes %d, writ envoy.max_request_bytes %d", got, cfg.Envoy.BodyLimit(cfg.Limits))
	}
	agent := p.clusters[p.hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster()]
	if got := int64(agent.GetPerConnectionBufferLimitBytes().GetValue()); got != cfg.Envoy.ResponseLimit() {
		t.Errorf("agent cluster per_connection_buffer_limit_bytes %d, writ envoy.max_response_bytes %d", got, cfg.Envoy.ResponseLimit())
	}
}
