// Package envoy holds the Envoy deployment examples (ext_proc, gRPC and HTTP
// ext_authz); this test keeps them honest without an Envoy binary: each YAML
// is decoded into Envoy's own v3 protos (unknown fields and wrong types fail),
// validated with the protos' generated rules, and checked against writ.yaml
// beside it.
package envoy

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/proxy/extproc"
)

// loadWrit loads writ.yaml exactly as `writ validate` does: config keys, identity
// sources, policies compiled and their tests run.
func loadWrit(t *testing.T) *config.Config {
	t.Helper()
	here, _ := os.Getwd()
	t.Chdir(filepath.Join(here, "../..")) // writ.yaml's paths are relative to the repository root
	cfg, err := config.Load(filepath.Join(here, "writ.yaml"))
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
		t.Fatalf("writ.yaml: want both ext_authz listeners and one agent: %+v", cfg.Envoy)
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
// public host are writ's agents[0].
func checkRoute(t *testing.T, p envoyParts, cfg *config.Config) {
	t.Helper()
	if p.filters[len(p.filters)-1] != "envoy.filters.http.router" {
		t.Errorf("filters %v: the router must come last", p.filters)
	}
	agent := cfg.Agents[0]
	vhs := p.hcm.GetRouteConfig().GetVirtualHosts()
	if len(vhs) != 1 || len(vhs[0].GetRoutes()) != 1 {
		t.Fatal("want one virtual host with one route")
	}
	rt := vhs[0].GetRoutes()[0]
	if rt.GetMatch().GetPrefix() != agent.Route {
		t.Errorf("route prefix %q, writ agents[0].route %q", rt.GetMatch().GetPrefix(), agent.Route)
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

// TestGRPCMode: envoy.yaml sends gRPC checks to writ's envoy.grpc_listen over
// HTTP/2, with the body as bytes, and the jwt_authn claims writ trusts.
func TestGRPCMode(t *testing.T) {
	cfg := loadWrit(t)
	p := parts(t, loadEnvoy(t, "deploy/envoy/envoy.yaml"))
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
// envoy.http_path_prefix, forwards every header writ reads, and copies writ's
// upstream headers.
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
	for _, h := range extauthz.RequestHeaders {
		if !slices.Contains(allowed, h) {
			t.Errorf("allowed_headers %v miss %s, which writ reads", allowed, h)
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
	cfg := loadWrit(t)
	files, _ := filepath.Glob("deploy/envoy/envoy*.yaml")
	if len(files) < 3 {
		t.Fatalf("only %v", files)
	}
	for _, f := range files {
		p := parts(t, loadEnvoy(t, f))
		checkRoute(t, p, cfg)
		if p.extAuthz != nil && p.extProc != nil {
			t.Errorf("%s runs ext_authz and ext_proc: ext_proc alone decides and sees answers (README)", f)
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
