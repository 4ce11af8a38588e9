package extauthz

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/proxy/writheader"
)

// admission is the seed's admission scenario: one table, run through the
// sidecar, gRPC Check and the HTTP ext_authz server.
var admission = []struct {
	name  string
	path  string
	who   *caller // nil: no credentials
	codes []string
}{
	{"sanctions allowed", "/", &investigator, nil},
	{"kyc", "/kyc/", &investigator, []string{"TENANT_NOT_PERMITTED", "CLASSIFICATION_EXCEEDED"}},
	{"marketing", "/marketing/", &investigator, []string{"CLASSIFICATION_EXCEEDED", "NO_ACCEPTABLE_AUTH"}},
	{"depth 4", "/", &caller{agent: "x", tenant: "wholesale", scopes: "delegate", chain: []string{"a", "b", "c", "d"}},
		[]string{"DEPTH_EXCEEDED"}},
	{"cycle", "/", &caller{agent: "x", tenant: "wholesale", scopes: "delegate", chain: []string{"sanctions-screening-agent"}},
		[]string{"CYCLE_DETECTED"}},
	{"scope", "/", &caller{agent: "x", tenant: "wholesale", scopes: "read"}, []string{"SCOPE_MISSING"}},
}

// TestAdmissionBothPaths: every row gets the same allow/deny, status and denial
// codes through Check as through the sidecar; an allowed check carries the
// caller the agent would have seen.
func TestAdmissionBothPaths(t *testing.T) {
	w := newWorld(t, "")
	for _, c := range admission {
		t.Run(c.name, func(t *testing.T) {
			tok := ""
			if c.who != nil {
				tok = w.token(*c.who)
			}
			r := post(c.path, tok, sendBody("Screen the beneficiary of PMT-771"))
			r.header["Writ-Caller"] = `{"agent_id":"forged"}`
			side := w.viaSidecar(r)
			resp := w.check(checkRequest(r))
			got := asAnswer(resp)
			meta := resp.GetDynamicMetadata().GetFields()
			if c.codes == nil {
				if side.status != 200 || reasons(side.body) != nil {
					t.Fatalf("sidecar refused an allowed delegation: %d %s", side.status, side.body)
				}
				ok := resp.GetOkResponse()
				if got != nil || ok == nil || resp.GetStatus().GetCode() != 0 || !meta[MetaAllow].GetBoolValue() {
					t.Fatalf("check: %v", resp)
				}
				hdr := map[string]string{}
				for _, h := range ok.GetHeaders() {
					hdr[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
					if h.GetAppendAction().String() != "OVERWRITE_IF_EXISTS_OR_ADD" {
						t.Errorf("header %s is not set-or-overwrite: %v", h.GetHeader().GetKey(), h.GetAppendAction())
					}
				}
				var who struct {
					AgentID string   `json:"agent_id"`
					Chain   []string `json:"chain"`
				}
				_ = json.Unmarshal([]byte(hdr["writ-caller"]), &who)
				if who.AgentID != "payments-investigator" || !slices.Equal(who.Chain, []string{"orchestrator"}) ||
					hdr["writ-decision-id"] != meta[MetaDecisionID].GetStringValue() || hdr["writ-decision-id"] == "" {
					t.Errorf("upstream headers %v", hdr)
				}
				// Envoy removes after it sets: Writ-Caller is overwritten, never removed.
				if slices.Contains(ok.GetHeadersToRemove(), "writ-caller") {
					t.Errorf("headers_to_remove %v would drop the Writ-Caller writ sets", ok.GetHeadersToRemove())
				}
				// The agent saw writ's caller, not the forged one.
				seen := w.sanctions.Requests()
				if !strings.Contains(seen[len(seen)-1].Caller, `"agent_id":"payments-investigator"`) {
					t.Errorf("agent saw Writ-Caller %q", seen[len(seen)-1].Caller)
				}
				return
			}
			if got == nil || got.status != side.status || got.status != 403 || got.contentType != side.contentType ||
				resp.GetStatus().GetCode() != 7 {
				t.Fatalf("check %v\nsidecar %d %s", resp, side.status, side.body)
			}
			want := append([]string{"PERMISSION_DENIED"}, c.codes...)
			if r := reasons(got.body); !sameSet(r, want) || !slices.Equal(r, reasons(side.body)) {
				t.Errorf("codes: check %v, sidecar %v, want %v", r, reasons(side.body), want)
			}
			if got.header.Get(writheader.Decision) == "" || got.header.Get("Cache-Control") != "no-store" {
				t.Errorf("denied headers %v", got.header)
			}
			var metaCodes []string
			for _, v := range meta[MetaDenials].GetListValue().GetValues() {
				metaCodes = append(metaCodes, v.GetStringValue())
			}
			if !sameSet(metaCodes, c.codes) || meta[MetaAllow].GetBoolValue() || meta[MetaStatus].GetNumberValue() != 403 ||
				meta[MetaOperation].GetStringValue() != "send" || meta[MetaProtocol].GetStringValue() != "a2a/0.3/jsonrpc" {
				t.Errorf("dynamic metadata %v", meta)
			}
		})
	}
	// No credentials: 401 both ways, UNAUTHENTICATED among the codes.
	r := post("/", "", sendBody("x"))
	side, got := w.viaSidecar(r), asAnswer(w.check(checkRequest(r)))
	if got == nil || got.status != 401 || side.status != 401 || !slices.Contains(reasons(got.body), "UNAUTHENTICATED") ||
		!slices.Equal(reasons(got.body), reasons(side.body)) {
		t.Errorf("anonymous: check %+v, sidecar %d %s", got, side.status, side.body)
	}
}

// TestAdmissionHTTPMode: the same table through the HTTP ext_authz server, under
// a path prefix: 200 with the upstream headers to allow, the sidecar's status and
// body to deny.
func TestAdmissionHTTPMode(t *testing.T) {
	w := newWorld(t, "envoy: {http_listen: '127.0.0.1:0', http_path_prefix: /authz}\n")
	for _, c := range admission {
		tok := ""
		if c.who != nil {
			tok = w.token(*c.who)
		}
		r := post(c.path, tok, sendBody("Screen the beneficiary of PMT-771"))
		r.header["Writ-Caller"] = `{"agent_id":"forged"}`
		got := w.viaHTTP(r, "/authz")
		if c.codes == nil {
			if got.status != 200 || !strings.Contains(got.header.Get(writheader.Caller), `"agent_id":"payments-investigator"`) ||
				got.header.Get(writheader.Decision) == "" || got.header.Get(HeadersToRemoveHeader) != "" {
				t.Errorf("%s: %d %v", c.name, got.status, got.header)
			}
			continue
		}
		side := w.viaSidecar(r)
		if got.status != side.status || !slices.Equal(reasons(got.body), reasons(side.body)) ||
			!sameSet(reasons(got.body)[1:], c.codes) || got.contentType != side.contentType {
			t.Errorf("%s: http %d %s, sidecar %d %s", c.name, got.status, got.body, side.status, side.body)
		}
	}
	// A JSON-RPC error travels in HTTP 200 from the sidecar, which Envoy would
	// read as "allow": through Envoy it is a refusal with the HTTP+JSON
	// binding's status (400 for a parse error) and the same body.
	r := post("/", w.token(investigator), []byte(`{"jsonrpc":`))
	got, side := w.viaHTTP(r, "/authz"), w.viaSidecar(r)
	if side.status != 200 || got.status != 400 || !slices.Equal(reasons(got.body), []string{"PARSE_ERROR"}) ||
		string(got.body) != string(side.body) {
		t.Errorf("parse error: http %d %s, sidecar %d %s", got.status, got.body, side.status, side.body)
	}
	// Outside the prefix: not a check writ can read.
	if got := w.viaHTTP(post("/", "", nil), "/elsewhere"); got.status != 400 {
		t.Errorf("outside the prefix: %d %s", got.status, got.body)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
