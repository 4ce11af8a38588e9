package bench

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
)

// parseFixtures are one wire fixture per operation (A2A 1.0 JSON-RPC), and one
// send of each other protocol version and binding.
var parseFixtures = []string{
	"a2a/v1.0/jsonrpc/send", "a2a/v1.0/jsonrpc/send_push", "a2a/v1.0/jsonrpc/send_file", "a2a/v1.0/jsonrpc/stream",
	"a2a/v1.0/jsonrpc/get", "a2a/v1.0/jsonrpc/list", "a2a/v1.0/jsonrpc/cancel", "a2a/v1.0/jsonrpc/subscribe",
	"a2a/v1.0/jsonrpc/push_set", "a2a/v1.0/jsonrpc/push_get", "a2a/v1.0/jsonrpc/push_list", "a2a/v1.0/jsonrpc/push_delete",
	"a2a/v1.0/jsonrpc/card_extended", "a2a/v1.0/card", "a2a/v1.0/rest/send", "a2a/v0.3/jsonrpc/send", "a2a/v0.3/rest/send",
	"acp/run_sync", "acp/run_resume", "acp/run_get",
}

// benchInbound is bench/request_allow.json's HTTP request: the 748-byte A2A 1.0
// SendMessage the load runs send.
func benchInbound(tb testing.TB) wire.Inbound {
	tb.Helper()
	raw, err := os.ReadFile("request_allow.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		tb.Fatal(err)
	}
	h := cr.GetAttributes().GetRequest().GetHttp()
	hdr := http.Header{}
	for k, v := range h.GetHeaders() {
		if !strings.HasPrefix(k, ":") {
			hdr.Set(k, v)
		}
	}
	return wire.Inbound{Method: h.GetMethod(), Path: h.GetPath(), Header: hdr, Body: []byte(h.GetBody())}
}

// BenchmarkParse: the adapters' exported Parse, per operation.
func BenchmarkParse(b *testing.B) {
	lim := wire.Limits{}.WithDefaults()
	cases := map[string]wire.Inbound{"bench-request": benchInbound(b)}
	names := []string{"bench-request"}
	for _, f := range parseFixtures {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", f+".request.http"))
		if err != nil {
			b.Fatal(err)
		}
		in, err := wire.ReadMessage(raw, 0)
		if err != nil {
			b.Fatalf("%s: %v", f, err)
		}
		cases[f], names = in, append(names, f)
	}
	for _, name := range names {
		in := cases[name]
		route, err := adapters.NewRoute("auto", "")
		if err != nil {
			b.Fatal(err)
		}
		edge := route.For(in.Path)
		if _, fault := edge.Parse(in, lim); fault != nil {
			b.Fatalf("%s: %v", name, fault)
		}
		b.Run(strings.ReplaceAll(name, "/", "-"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				edge.Parse(in, lim)
			}
		})
	}
}
