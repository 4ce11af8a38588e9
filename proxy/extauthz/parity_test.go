package extauthz

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/writheader"
)

// TestFixtureParity runs every recorded A2A request (v0.3 and v1.0, JSON-RPC and
// REST, and the malformed ones) through the sidecar's Check path and through gRPC
// Check, as the investigator, and asserts identical decisions: allow, status,
// content type, body (modulo decision ids) and the upstream headers.
func TestFixtureParity(t *testing.T) {
	for _, unknown := range []string{"deny", "allow"} {
		t.Run("unknown_tasks="+unknown, func(t *testing.T) {
			w := newWorld(t, "lifecycle: {unknown_tasks: "+unknown+"}\n")
			tok := w.token(investigator)
			files, _ := filepath.Glob("../../testdata/a2a/*/*.request.http")
			more, _ := filepath.Glob("../../testdata/a2a/*/*/*.request.http")
			files = append(files, more...)
			if len(files) < 60 {
				t.Fatalf("only %d fixtures", len(files))
			}
			allowed, answered := 0, 0
			for _, f := range files {
				name := strings.TrimPrefix(f, "../../testdata/a2a/")
				r, ok := readFixture(t, f)
				if !ok {
					continue // not an HTTP message the sidecar could have received either
				}
				r.header["Authorization"] = "Bearer " + tok
				sidecar := w.px.Admit(t.Context(), incomingOf(r))
				resp := w.check(checkRequest(r))
				got := asAnswer(resp)
				allow := sidecar.Kind == proxy.Forward
				if allow {
					allowed++
				} else {
					answered++
				}
				switch {
				case allow != (got == nil):
					t.Errorf("%s: sidecar %s, check %v", name, sidecar.Kind, resp)
				case allow:
					ok := resp.GetOkResponse()
					id := resp.GetDynamicMetadata().GetFields()[MetaDecisionID].GetStringValue()
					for _, h := range ok.GetHeaders() {
						want := sidecar.Plan.Header.Get(h.GetHeader().GetKey())
						if h.GetHeader().GetKey() == "writ-decision-id" {
							want = strings.ReplaceAll(want, sidecar.DecisionID, id)
						}
						if h.GetHeader().GetValue() != want {
							t.Errorf("%s: upstream %s = %q, sidecar %q", name, h.GetHeader().GetKey(), h.GetHeader().GetValue(), want)
						}
					}
					if len(ok.GetHeaders()) != len(sidecar.Plan.Header) {
						t.Errorf("%s: upstream headers %v, sidecar %v", name, ok.GetHeaders(), sidecar.Plan.Header)
					}
				default:
					if got.header.Get(writheader.AnsweredBy) != writheader.Writ || sidecar.Answer.Header.Get(writheader.AnsweredBy) != writheader.Writ {
						t.Errorf("%s: writ's own answer is not marked %s: check %v, sidecar %v", name, writheader.AnsweredBy, got.header, sidecar.Answer.Header)
					}
					id := got.header.Get(writheader.Decision)
					want := string(sidecar.Answer.Body)
					if sidecar.DecisionID != "" {
						want = strings.ReplaceAll(want, sidecar.DecisionID, id)
					}
					if got.status != sidecar.EnvoyStatus() || got.status < 300 && sidecar.Kind == proxy.Refuse ||
						got.contentType != sidecar.Answer.ContentType || unsigned(string(got.body)) != unsigned(want) {
						t.Errorf("%s: check %d %q %s\nsidecar %d %q %s", name, got.status, got.contentType, got.body,
							sidecar.Answer.Status, sidecar.Answer.ContentType, sidecar.Answer.Body)
					}
				}
			}
			t.Logf("%d fixtures allowed, %d answered by writ", allowed, answered)
			if allowed < 10 || answered < 30 {
				t.Errorf("too few of each kind: %d allowed, %d answered", allowed, answered)
			}
		})
	}
}

// readFixture reads a recorded HTTP/1.1 request message.
func readFixture(t *testing.T, path string) (req, bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return req{}, false
	}
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		return req{}, false
	}
	r := req{method: hr.Method, path: hr.URL.RequestURI(), body: body, header: map[string]string{}}
	for k, v := range hr.Header {
		r.header[k] = strings.Join(v, ", ")
	}
	return r, true
}

// incomingOf is r as the sidecar's listener reads it.
func incomingOf(r req) proxy.Incoming {
	hr, _ := http.NewRequest(r.method, "http://writ.test"+r.path, nil)
	hdr := http.Header{}
	for k, v := range r.header {
		hdr.Set(k, v)
	}
	var body []byte
	if len(r.body) > 0 {
		body = r.body
	}
	return proxy.Incoming{Method: r.method, Path: hr.URL.Path, Query: hr.URL.Query(), RawQuery: hr.URL.RawQuery, Host: "writ.test",
		RemoteAddr: "127.0.0.1:1", Header: hdr, Body: body}
}
