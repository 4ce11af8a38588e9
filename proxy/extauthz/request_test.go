package extauthz

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"github.com/writ-authz/writ/adapters"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// upstreamCaller is the Writ-Caller an OK response sets, decoded.
func upstreamCaller(t *testing.T, resp *authv3.CheckResponse) (agent, method string) {
	t.Helper()
	ok := resp.GetOkResponse()
	if ok == nil {
		t.Fatalf("not allowed: %v", resp)
	}
	for _, h := range ok.GetHeaders() {
		if h.GetHeader().GetKey() == "writ-caller" {
			var c struct{ AgentID, Method string }
			_ = json.Unmarshal([]byte(h.GetHeader().GetValue()), &struct {
				AgentID *string `json:"agent_id"`
				Method  *string `json:"method"`
			}{&c.AgentID, &c.Method})
			return c.AgentID, c.Method
		}
	}
	t.Fatalf("no writ-caller in %v", ok)
	return "", ""
}

// TestHeaderMap: with encode_raw_headers Envoy sends header_map (raw byte values,
// repeated keys apart) instead of headers; the decision is the same.
func TestHeaderMap(t *testing.T) {
	w := newWorld(t, "")
	cr := checkRequest(post("/", w.token(investigator), sendBody("x")))
	h := cr.Attributes.Request.Http
	var hm corev3.HeaderMap
	for k, v := range h.Headers {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: "writ-caller", RawValue: []byte(`{"agent_id":"forged"}`)},
		&corev3.HeaderValue{Key: "x-a2a-extensions", RawValue: []byte("urn:a")},
		&corev3.HeaderValue{Key: "x-a2a-extensions", RawValue: []byte("urn:b")})
	h.Headers, h.HeaderMap = nil, &hm
	if agent, method := upstreamCaller(t, w.check(cr)); agent != "payments-investigator" || method != "jwt" {
		t.Errorf("header_map caller %q %q", agent, method)
	}
	hdr, _ := headersOf(h)
	if got := hdr.Values("X-A2a-Extensions"); !slices.Equal(got, []string{"urn:a", "urn:b"}) {
		t.Errorf("repeated header %v", got)
	}
	// Two Authorization headers are refused as the sidecar refuses them.
	hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: "authorization", RawValue: []byte("Bearer x")})
	if got := asAnswer(w.check(cr)); got == nil || got.status != 401 {
		t.Errorf("two Authorization headers: %+v", got)
	}
}

// TestPartialBody: a body Envoy cut short is refused as too large (413, the
// sidecar's answer to a body over its limit); allow_partial_body decides it on
// headers alone, so an operation that needs its body is refused by the adapter
// and one that does not is decided.
func TestPartialBody(t *testing.T) {
	partial := func(r req) *authv3.CheckRequest {
		r.header[PartialBodyHeader] = "true"
		cr := checkRequest(r)
		cr.Attributes.Request.Http.RawBody = r.body[:len(r.body)/2]
		return cr
	}
	w := newWorld(t, "")
	tok := w.token(investigator)
	got := asAnswer(w.check(partial(post("/", tok, sendBody("x")))))
	if got == nil || got.status != 413 || !slices.Equal(reasons(got.body), []string{"PAYLOAD_TOO_LARGE"}) {
		t.Fatalf("partial body: %+v %s", got, got.body)
	}
	// Envoy marks a complete body "false".
	r := post("/", tok, sendBody("x"))
	r.header[PartialBodyHeader] = "false"
	if resp := w.check(checkRequest(r)); resp.GetOkResponse() == nil {
		t.Errorf("complete body refused: %v", resp)
	}

	w = newWorld(t, "envoy: {grpc_listen: '127.0.0.1:0', allow_partial_body: true}\n")
	tok = w.token(investigator)
	got = asAnswer(w.check(partial(post("/", tok, sendBody("x")))))
	if got == nil || got.status != 400 || !slices.Equal(reasons(got.body), []string{"PARSE_ERROR"}) {
		t.Errorf("JSON-RPC on headers alone (a refusal is never a 2xx through Envoy): %+v %s", got, got.body)
	}
	rest := post("/message:send", tok, []byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`))
	rest.header["A2A-Version"] = "1.0"
	if got = asAnswer(w.check(partial(rest))); got == nil || got.status != 400 || !slices.Equal(reasons(got.body), []string{"INVALID_PARAMS"}) {
		t.Errorf("REST send on headers alone: %+v", got)
	}
	cancel := post("/tasks/t-1:cancel", tok, []byte(`{"padding":"................................"}`))
	cancel.header["A2A-Version"] = "1.0"
	if got = asAnswer(w.check(partial(cancel))); got == nil || got.status != 404 || !slices.Equal(reasons(got.body), []string{"TASK_NOT_FOUND"}) {
		t.Errorf("REST cancel on headers alone (decided: an unknown task): %+v", got)
	}
}

// TestBodyFaults: a malformed body and a missing one get the protocol's own
// error as the denied body, exactly the sidecar's; the status is the one the
// HTTP+JSON binding gives the fault (the sidecar sends JSON-RPC errors in a
// 200, as the A2A SDKs expect; through Envoy a refusal is never a 2xx).
func TestBodyFaults(t *testing.T) {
	w := newWorld(t, "")
	tok := w.token(investigator)
	rest := post("/message:send", tok, nil)
	rest.header["A2A-Version"] = "1.0"
	for name, c := range map[string]struct {
		r     req
		codes []string
	}{
		"malformed JSON-RPC": {post("/", tok, []byte(`{"jsonrpc":"2.0","method":`)), []string{"PARSE_ERROR"}},
		"JSON-RPC no body":   {post("/", tok, nil), []string{"PARSE_ERROR"}},
		"REST send no body":  {rest, []string{"INVALID_PARAMS"}},
	} {
		side, got := w.viaSidecar(c.r), asAnswer(w.check(checkRequest(c.r)))
		if got == nil || got.status != 400 || side.status >= 300 && side.status != got.status || string(got.body) != string(side.body) ||
			got.contentType != side.contentType || !slices.Equal(reasons(got.body), c.codes) {
			t.Errorf("%s: check %+v %s\nsidecar %d %s", name, got, got.body, side.status, side.body)
		}
	}
	// Over max_request_bytes: too large, as the sidecar.
	big := post("/", tok, bytes.Repeat([]byte(" "), int(w.ext.cfg.MaxRequestBytes)+1))
	cr := checkRequest(big)
	if got := asAnswer(w.check(cr)); got == nil || got.status != 413 {
		t.Errorf("too large: %+v", got)
	}
	// Past the gRPC message bound, the check itself fails (Envoy fails closed).
	cr.Attributes.Request.Http.RawBody = bytes.Repeat([]byte(" "), w.ext.maxRecvMsgSize()+1)
	if _, err := w.client.Check(t.Context(), cr); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("oversized message: %v", err)
	}
	// A check without HTTP attributes is a gRPC error; a path writ cannot read a 400.
	if _, err := w.client.Check(t.Context(), &authv3.CheckRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty check: %v", err)
	}
	odd := checkRequest(post("/", tok, nil))
	odd.Attributes.Request.Http.Path = "*"
	if got := asAnswer(w.check(odd)); got == nil || got.status != 400 {
		t.Errorf("path *: %+v", got)
	}
}

// TestJWTAuthn: claims Envoy's jwt_authn verified are the caller when their
// issuer is trusted; claims of any other issuer are ignored, and the bearer path
// stays exactly as strict as without them.
func TestJWTAuthn(t *testing.T) {
	w := newWorld(t, "envoy: {grpc_listen: '127.0.0.1:0', jwt_authn: {issuers: [https://idp.envoy-verified]}}\n")
	withClaims := func(r req, claims ...map[string]any) *authv3.CheckRequest {
		cr := checkRequest(r)
		fields := map[string]*structpb.Value{}
		for i, c := range claims {
			s, err := structpb.NewStruct(c)
			if err != nil {
				t.Fatal(err)
			}
			fields[[]string{"idp", "other"}[i]] = structpb.NewStructValue(s)
		}
		cr.Attributes.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"envoy.filters.http.jwt_authn": {Fields: fields}}}
		return cr
	}
	trusted := investigator
	trusted.issuer = "https://idp.envoy-verified"
	untrusted := investigator
	untrusted.issuer = "https://idp.evil"

	// Trusted: no bearer token needed (jwt_authn may have consumed it).
	if agent, method := upstreamCaller(t, w.check(withClaims(post("/", "", sendBody("x")), w.claims(trusted)))); agent != "payments-investigator" || method != "jwt" {
		t.Errorf("trusted claims: %q %q", agent, method)
	}
	// Untrusted and no bearer: anonymous, 401.
	if got := asAnswer(w.check(withClaims(post("/", "", sendBody("x")), w.claims(untrusted)))); got == nil || got.status != 401 {
		t.Errorf("untrusted claims: %+v", got)
	}
	// Untrusted claims beside a bearer: the bearer decides, as if they were absent.
	deep := caller{agent: "x", tenant: "wholesale", scopes: "delegate", chain: []string{"a", "b", "c", "d"}}
	got := asAnswer(w.check(withClaims(post("/", w.token(deep), sendBody("x")), w.claims(untrusted))))
	if got == nil || !slices.Contains(reasons(got.body), "DEPTH_EXCEEDED") {
		t.Errorf("untrusted claims beside a bearer: %+v", got)
	}
	// A trusted claim set that fails its checks is anonymous, never the bearer.
	expired := trusted
	expired.expired = true
	if got := asAnswer(w.check(withClaims(post("/", w.token(investigator), sendBody("x")), w.claims(expired)))); got == nil || got.status != 401 {
		t.Errorf("expired trusted claims: %+v", got)
	}
	// Two trusted claim sets: writ cannot tell which speaks; anonymous.
	if got := asAnswer(w.check(withClaims(post("/", "", sendBody("x")), w.claims(trusted), w.claims(trusted)))); got == nil || got.status != 401 {
		t.Errorf("two trusted claim sets: %+v", got)
	}
	// Without jwt_authn configured, the metadata is never read.
	plain := newWorld(t, "")
	if got := asAnswer(plain.check(withClaims(post("/", "", sendBody("x")), w.claims(trusted)))); got == nil || got.status != 401 {
		t.Errorf("jwt_authn off: %+v", got)
	}
}

// TestDryRun: every refusal is let through and logged with what writ would have
// answered; the verdict is in dynamic_metadata; writ's directory is still served.
func TestDryRun(t *testing.T) {
	w := newWorld(t, "envoy: {grpc_listen: '127.0.0.1:0', http_listen: '127.0.0.1:0', dry_run: true}\n")
	r := post("/kyc/", w.token(investigator), sendBody("x"))
	r.header["Writ-Caller"] = `{"agent_id":"forged"}`
	resp := w.check(checkRequest(r))
	ok, meta := resp.GetOkResponse(), resp.GetDynamicMetadata().GetFields()
	if ok == nil || !meta[MetaDryRun].GetBoolValue() || meta[MetaAllow].GetBoolValue() || meta[MetaStatus].GetNumberValue() != 403 ||
		len(meta[MetaDenials].GetListValue().GetValues()) != 2 {
		t.Fatalf("dry-run: %v", resp)
	}
	if !slices.Equal(ok.GetHeadersToRemove(), []string{"writ-caller"}) || len(ok.GetHeaders()) != 1 ||
		ok.GetHeaders()[0].GetHeader().GetValue() != meta[MetaDecisionID].GetStringValue() {
		t.Errorf("dry-run headers: %v", ok)
	}
	if logs := w.logs.String(); !strings.Contains(logs, "dry-run") || !strings.Contains(logs, "TENANT_NOT_PERMITTED") {
		t.Errorf("dry-run log: %s", logs)
	}
	if h := w.viaHTTP(r, ""); h.status != 200 || !strings.Contains(h.header.Get(HeadersToRemoveHeader), "writ-caller") {
		t.Errorf("dry-run over HTTP: %d %v", h.status, h.header)
	}
	dir := req{method: "GET", path: adapters.DirectoryPath + "?tags=sanctions", header: map[string]string{"Authorization": "Bearer " + w.token(investigator)}}
	if got := asAnswer(w.check(checkRequest(dir))); got == nil || got.status != 200 || !strings.Contains(string(got.body), "sanctions-screening-agent") {
		t.Errorf("directory in dry-run: %+v", got)
	}
}

// TestPeerCertificate: the client certificate Envoy verified (URL-encoded PEM),
// or the SPIFFE principal it took from it, identifies an mTLS caller.
func TestPeerCertificate(t *testing.T) {
	w := newWorld(t, "")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	id, _ := url.Parse("spiffe://bank.ae/agents/payments-investigator")
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "payments-investigator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{id}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pemText := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	r := post("/", "", sendBody("x"))
	for name, peer := range map[string]*authv3.AttributeContext_Peer{
		"certificate": {Certificate: url.QueryEscape(pemText)},
		"principal":   {Principal: id.String()},
	} {
		cr := checkRequest(r)
		peer.Address = &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "10.0.3.17", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 48122}}}}
		cr.Attributes.Source = peer
		resp := w.check(cr)
		// The policy admits no mTLS caller without a tenant; what matters is who it judged.
		got := asAnswer(resp)
		if got == nil || slices.Contains(reasons(got.body), "UNAUTHENTICATED") || got.status != 403 {
			t.Errorf("%s: %+v %s", name, got, got.body)
		}
	}
	inc, err := w.ext.fromCheck(func() *authv3.CheckRequest {
		cr := checkRequest(r)
		cr.Attributes.Source = &authv3.AttributeContext_Peer{Certificate: url.PathEscape(pemText),
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.3.17", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 48122}}}}}
		return cr
	}())
	if err != nil || len(inc.PeerCertificates) != 1 || inc.PeerCertificates[0].URIs[0].String() != id.String() ||
		inc.RemoteAddr != "10.0.3.17:48122" {
		t.Errorf("incoming %+v %v", inc, err)
	}
}

// TestHealthAndReflection: grpc.health.v1 reports SERVING; reflection is
// registered only when configured.
func TestHealthAndReflection(t *testing.T) {
	w := newWorld(t, "")
	for _, svc := range []string{"", "envoy.service.auth.v3.Authorization"} {
		h, err := healthpb.NewHealthClient(w.conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v", svc, h, err)
		}
	}
	if _, on := w.ext.grpc.GetServiceInfo()["grpc.reflection.v1.ServerReflection"]; on {
		t.Error("reflection on by default")
	}
	w = newWorld(t, "envoy: {grpc_listen: '127.0.0.1:0', reflection: true}\n")
	if _, on := w.ext.grpc.GetServiceInfo()["grpc.reflection.v1.ServerReflection"]; !on {
		t.Errorf("reflection off: %v", w.ext.grpc.GetServiceInfo())
	}
}
