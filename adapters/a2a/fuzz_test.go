package a2a

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// seedBodies adds the bodies of the captured JSON-RPC requests to a fuzz corpus.
func seedBodies(f *testing.F, glob string, add func(in wire.Inbound)) {
	files, _ := filepath.Glob(filepath.Join(fixtures, glob))
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		in, err := wire.ReadMessage(raw, 0)
		if err != nil {
			continue
		}
		add(in)
	}
}

// checkParsed holds for any input: no panic, a fault or an operation, and a fault
// always renders to a non-empty answer.
func checkParsed(t *testing.T, req task.Request, f *task.Fault) {
	if f == nil && req.Operation == "" {
		t.Fatalf("no fault and no operation: %+v", req)
	}
	if f != nil {
		if f.Kind == "" || f.Message == "" {
			t.Fatalf("empty fault %+v", f)
		}
		if r := RenderFault(&req, f); len(r.Body) == 0 || r.Status == 0 {
			t.Fatalf("empty rendering of %v", f)
		}
	}
	if req.Classification != "" && req.Classification.Rank() < 0 {
		t.Fatalf("unknown classification %q passed", req.Classification)
	}
}

// FuzzParseJSONRPC feeds arbitrary bodies to the JSON-RPC parser under both
// version headers.
func FuzzParseJSONRPC(f *testing.F) {
	seedBodies(f, "*/jsonrpc/*.request.http", func(in wire.Inbound) {
		f.Add(in.Body, in.Header.Get(VersionHeader) == V10)
	})
	seedBodies(f, "bad/*.request.http", func(in wire.Inbound) {
		f.Add(in.Body, true)
	})
	f.Fuzz(func(t *testing.T, body []byte, v10 bool) {
		h := http.Header{}
		if v10 {
			h.Set(VersionHeader, V10)
		}
		req, fault := Parse(wire.Inbound{Method: http.MethodPost, Path: "/", Header: h, Body: body}, Options{})
		checkParsed(t, req, fault)
	})
}

// FuzzParseREST feeds arbitrary methods, paths, queries and bodies to the REST
// router.
func FuzzParseREST(f *testing.F) {
	seedBodies(f, "*/rest/*.request.http", func(in wire.Inbound) {
		f.Add(in.Method, in.Path, in.Query.Encode(), in.Body, in.Header.Get(VersionHeader))
	})
	f.Add("GET", "/tenant/tasks/t-1/pushNotificationConfigs/c-1", "historyLength=2", []byte(nil), "1.0")
	f.Add("POST", "/v1/tasks/:cancel", "", []byte("null"), "")
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte, version string) {
		h := http.Header{}
		h.Set(VersionHeader, version)
		q, _ := url.ParseQuery(query)
		req, fault := Parse(wire.Inbound{Method: method, Path: path, Query: q, Header: h, Body: body}, Options{})
		checkParsed(t, req, fault)
	})
}
