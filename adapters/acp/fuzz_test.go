package acp

import (
	"net/http"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
)

// FuzzParse feeds Parse arbitrary methods, paths, headers and bodies, seeded from
// every request fixture. Parse must never panic; a nil fault means a named
// operation of protocol acp.
func FuzzParse(f *testing.F) {
	for _, name := range fixtureNames(f, ".request.http") {
		in := readRequest(f, name)
		f.Add(in.Method, in.Path, in.Header.Get(wire.ClassificationHeader), in.Header.Get("Content-Type"), in.Body)
	}
	f.Add("POST", "/runs/r1", "internal", "", []byte(`{"await_resume":{"message":{"role":"user","parts":[{"content":"x"}]}},"mode":"stream"}`))
	f.Fuzz(func(t *testing.T, method, path, level, ctype string, body []byte) {
		h := http.Header{}
		if level != "" {
			h.Set(wire.ClassificationHeader, level)
		}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		in := wire.Inbound{Method: method, Path: path, Header: h, Body: body}
		req, fault := Parse(in, Options{Limits: wire.Limits{MaxBodyBytes: 1 << 16, MaxJSONDepth: 16}})
		if req.Protocol.Name != ProtocolName {
			t.Fatalf("protocol %q", req.Protocol.Name)
		}
		if fault == nil && req.Operation == "" {
			t.Fatalf("no fault and no operation for %s %s %q", method, path, body)
		}
		if fault != nil {
			if r := RenderFault(&req, fault); r.Status < 400 || len(r.Body) == 0 {
				t.Fatalf("fault %v renders as %d", fault, r.Status)
			}
		}
	})
}
