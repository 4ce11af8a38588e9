package extauthz

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/extproc"
)

// TestFrontDoorParity runs the sidecar's scenarios — allowed and denied sends,
// an anonymous one, a card visible and hidden, writ's directory and the ACP
// agent listing — through every front door: the sidecar's listener, gRPC
// ext_authz, HTTP ext_authz and ext_proc (behind a fake Envoy that forwards
// to the agents), each with the caller identified the way that door sees it
// (a bearer token; Envoy's jwt_authn claims; an mTLS certificate Envoy
// verified). Every door must give the caller the same answer.
func TestFrontDoorParity(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	id, _ := url.Parse("spiffe://bank.ae/agents/mapped-investigator")
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "mapped-investigator"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), URIs: []*url.URL{id}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	mapping := filepath.Join(t.TempDir(), "spiffe.yaml")
	if err := os.WriteFile(mapping, []byte(id.String()+": {agent_id: payments-investigator, tenant: wholesale, scopes: [delegate]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWorldMapped(t, "envoy: {grpc_listen: '127.0.0.1:0', http_listen: '127.0.0.1:0', ext_proc_listen: '127.0.0.1:0', jwt_authn: {issuers: ["+testIssuer+"]}}\n", mapping)
	tok := w.token(investigator)
	claims := w.claims(investigator)

	// How each door learns who is calling.
	type door struct {
		name string
		// who groups the doors that see one caller: a bearer token and the
		// same claims through jwt_authn are one caller, the mTLS agent another.
		who string
		do  func(r req) answer
	}
	bearer := func(r req) req {
		r.header = copyHeader(r.header)
		r.header["Authorization"] = "Bearer " + tok
		return r
	}
	doors := []door{
		{"sidecar bearer", "token", func(r req) answer { return sidecarAnswer(w, bearer(r)) }},
		{"sidecar mTLS", "mtls", func(r req) answer {
			inc := incomingOf(r)
			inc.PeerCertificates = []*x509.Certificate{cert}
			return outcomeAnswer(w.px.Admit(t.Context(), inc))
		}},
		{"grpc bearer", "token", func(r req) answer { return checkAnswer(w.check(checkRequest(bearer(r)))) }},
		{"grpc jwt_authn", "token", func(r req) answer {
			cr := checkRequest(r)
			s, err := structpb.NewStruct(claims)
			if err != nil {
				t.Fatal(err)
			}
			cr.Attributes.MetadataContext = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				"envoy.filters.http.jwt_authn": {Fields: map[string]*structpb.Value{"idp": structpb.NewStructValue(s)}}}}
			return checkAnswer(w.check(cr))
		}},
		{"grpc mTLS", "mtls", func(r req) answer {
			cr := checkRequest(r)
			cr.Attributes.Source = &authv3.AttributeContext_Peer{
				Certificate: url.QueryEscape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))}
			return checkAnswer(w.check(cr))
		}},
		{"http bearer", "token", func(r req) answer { return httpAnswer(w.viaHTTP(bearer(r), "")) }},
	}
	claimSet, err := structpb.NewStruct(claims)
	if err != nil {
		t.Fatal(err)
	}
	extBearer := w.extProcDoor(nil, nil)
	extJWT := w.extProcDoor(&corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"envoy.filters.http.jwt_authn": {Fields: map[string]*structpb.Value{"idp": structpb.NewStructValue(claimSet)}}}}, nil)
	extMTLS := w.extProcDoor(nil, map[string]*structpb.Value{extproc.AttrPeerURISAN: structpb.NewStringValue(id.String())})
	doors = append(doors,
		door{"ext_proc bearer", "token", func(r req) answer { return sidecarAnswerVia(w, extBearer, bearer(r)) }},
		door{"ext_proc jwt_authn", "token", func(r req) answer { return sidecarAnswerVia(w, extJWT, r) }},
		door{"ext_proc mTLS", "mtls", func(r req) answer { return sidecarAnswerVia(w, extMTLS, r) }})
	get := func(path string) req { return req{method: "GET", path: path, header: map[string]string{}} }
	scenarios := []struct {
		name string
		r    req
		want func(t *testing.T, a answer)
	}{
		{"send allowed", post("/", "", sendBody("x")), func(t *testing.T, a answer) {
			if a.status != http.StatusOK || a.forwarded != true {
				t.Errorf("%d forwarded=%v %s", a.status, a.forwarded, a.body)
			}
		}},
		{"send denied", post("/kyc/", "", sendBody("x")), func(t *testing.T, a answer) {
			if a.status != 403 || !slices.Contains(reasons(a.body), "TENANT_NOT_PERMITTED") {
				t.Errorf("%d %s", a.status, a.body)
			}
		}},
		{"card visible", get("/.well-known/agent-card.json"), func(t *testing.T, a answer) {
			if a.status != 200 || !strings.Contains(string(a.body), "sanctions") {
				t.Errorf("%d %s", a.status, a.body)
			}
		}},
		{"card hidden", get("/kyc/.well-known/agent-card.json"), func(t *testing.T, a answer) {
			if a.status != 404 {
				t.Errorf("%d %s", a.status, a.body)
			}
		}},
		{"directory", get(adapters.DirectoryPath + "?tags=sanctions"), func(t *testing.T, a answer) {
			if names := agentNames(t, a.body); a.status != 200 || !slices.Equal(names, []string{"sanctions-screening-agent"}) {
				t.Errorf("%d %v %s", a.status, names, a.body)
			}
		}},
		// The query is decided as sent, by every door: a parameter named
		// twice or a bad escape, which readers behind writ read otherwise
		// than Go's lenient parse, is refused alike.
		{"query named twice", req{method: "GET", path: "/tasks/t-1?tenant=wholesale&tenant=retail",
			header: map[string]string{"A2A-Version": "1.0"}}, func(t *testing.T, a answer) {
			if a.status != 400 || !slices.Contains(reasons(a.body), "INVALID_PARAMS") || a.forwarded {
				t.Errorf("%d forwarded=%v %s", a.status, a.forwarded, a.body)
			}
		}},
		{"query malformed", req{method: "GET", path: "/tasks/t-1?tenant=retail%",
			header: map[string]string{"A2A-Version": "1.0"}}, func(t *testing.T, a answer) {
			if a.status != 400 || !slices.Contains(reasons(a.body), "INVALID_PARAMS") || a.forwarded {
				t.Errorf("%d forwarded=%v %s", a.status, a.forwarded, a.body)
			}
		}},
		{"ACP listing", get("/agents"), func(t *testing.T, a answer) {
			if names := agentNames(t, a.body); a.status != 200 || !slices.Contains(names, "sanctions-screening-agent") ||
				slices.Contains(names, "kyc-refresh-agent") {
				t.Errorf("%d %v %s", a.status, names, a.body)
			}
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			first := map[string]answer{}
			firstDoor := map[string]string{}
			for _, d := range doors {
				a := d.do(sc.r)
				t.Run(d.name, func(t *testing.T) { sc.want(t, a) })
				ref, seen := first[d.who]
				if !seen {
					first[d.who], firstDoor[d.who] = a, d.name
					continue
				}
				if a.status != ref.status || a.forwarded != ref.forwarded || normal(a.body) != normal(ref.body) {
					t.Errorf("%s answers %d forwarded=%v %s\n%s answers %d forwarded=%v %s", d.name, a.status, a.forwarded,
						a.body, firstDoor[d.who], ref.status, ref.forwarded, ref.body)
				}
			}
		})
	}
	// Anonymous: one UNAUTHENTICATED, through every door that can be anonymous.
	anon := []answer{sidecarAnswer(w, post("/", "", sendBody("x"))), checkAnswer(w.check(checkRequest(post("/", "", sendBody("x"))))),
		httpAnswer(w.viaHTTP(post("/", "", sendBody("x")), "")), sidecarAnswerVia(w, extBearer, post("/", "", sendBody("x")))}
	for i, a := range anon {
		if a.status != 401 || !slices.Contains(reasons(a.body), "UNAUTHENTICATED") || normal(a.body) != normal(anon[0].body) {
			t.Errorf("anonymous door %d: %d %s", i, a.status, a.body)
		}
	}
}

// copyHeader copies a header map.
func copyHeader(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// outcomeAnswer is what a caller gets for an Outcome (a forwarded request
// answers 200 here: the agent's answer is not the door's business).
func outcomeAnswer(out proxy.Outcome) answer {
	if out.Kind == proxy.Forward {
		return answer{status: 200, forwarded: true}
	}
	return answer{status: out.Answer.Status, contentType: out.Answer.ContentType, body: out.Answer.Body}
}

// sidecarAnswer sends r through the sidecar; a request the agent received is
// "forwarded" (its answer is the agent's, not the door's).
func sidecarAnswer(w *world, r req) answer { return sidecarAnswerVia(w, w.sidecar.URL, r) }

// sidecarAnswerVia is sidecarAnswer through the door listening at base (the
// sidecar, or the fake Envoy in front of ext_proc).
func sidecarAnswerVia(w *world, base string, r req) answer {
	sends := func() (n int) {
		for _, o := range w.sanctions.Requests() {
			if o.Method == "message/send" {
				n++
			}
		}
		return n
	}
	before := sends()
	a := w.viaBase(base, r)
	if sends() > before {
		return answer{status: a.status, forwarded: true}
	}
	return a
}

// checkAnswer is what a caller gets through a gRPC check.
func checkAnswer(resp *authv3.CheckResponse) answer {
	if a := asAnswer(resp); a != nil {
		return *a
	}
	return answer{status: 200, forwarded: true}
}

// httpAnswer is what a caller gets through the HTTP ext_authz server (a 2xx
// answer of writ's own is sent as 203, which Envoy passes on as is).
func httpAnswer(a answer) answer {
	switch {
	case a.status == http.StatusOK:
		return answer{status: 200, forwarded: true}
	case a.status == http.StatusNonAuthoritativeInfo:
		a.status = http.StatusOK
	}
	return a
}

// signaturesRe matches the signatures of a card writ signed: ECDSA signs
// anew each time, so two answers of one card differ there and only there.
var signaturesRe = regexp.MustCompile(`"signatures":\[[^\]]*\]`)

// unsigned is body with the signatures of its cards blanked out.
func unsigned(body string) string {
	return signaturesRe.ReplaceAllString(body, `"signatures":["SIGNED"]`)
}

// normal is a body with decision ids and card signatures blanked out (each
// door decides anew, and each signature is a new one).
func normal(body []byte) string {
	s := unsigned(string(body))
	for _, marker := range []string{"decision ", `"decision_id":"`} {
		for i := strings.Index(s, marker); i >= 0; {
			j := i + len(marker)
			k := j
			for k < len(s) && strings.IndexByte("0123456789abcdef", s[k]) >= 0 {
				k++
			}
			s = s[:j] + "ID" + s[k:]
			if n := strings.Index(s[j+2:], marker); n >= 0 {
				i = j + 2 + n
			} else {
				i = -1
			}
		}
	}
	return s
}

// agentNames lists the names in a directory or listing answer.
func agentNames(t *testing.T, body []byte) []string {
	t.Helper()
	var doc struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil
	}
	var out []string
	for _, a := range doc.Agents {
		out = append(out, a.Name)
	}
	return out
}
