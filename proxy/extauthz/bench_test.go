package extauthz

import (
	"os"
	"strconv"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// benchRequest is bench/request_allow.json (the check make bench-envoy sends)
// with its token replaced by the test issuer's for the same caller.
func benchRequest(b *testing.B, w *world) *authv3.CheckRequest {
	b.Helper()
	raw, err := os.ReadFile("../../bench/request_allow.json")
	if err != nil {
		b.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		b.Fatal(err)
	}
	cr.Attributes.Request.Http.Headers["authorization"] = "Bearer " + w.token(investigator)
	return &cr
}

// BenchmarkCheck is one allowed check in process, without gRPC, decision cache
// warm: what writ adds per check to the transport's own cost.
func BenchmarkCheck(b *testing.B) {
	w := newWorld(b, "")
	cr := benchRequest(b, w)
	if resp, _ := w.ext.Check(b.Context(), cr); resp.GetOkResponse() == nil {
		b.Fatalf("not allowed: %v", resp)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = w.ext.Check(b.Context(), cr)
	}
}

// BenchmarkCheckNewSubject is one allowed check in process, without gRPC,
// each from another subject of the benchmark caller's agent with a token of
// its own: every request from another person (the distinct-subject
// workload). Each token is verified (RS256) as a new one; the decision is
// the send's, whose residual does not read the subject. Tokens are signed
// with the timer stopped.
func BenchmarkCheckNewSubject(b *testing.B) {
	w := newWorld(b, "")
	cr := benchRequest(b, w)
	headers := cr.Attributes.Request.Http.Headers
	if resp, _ := w.ext.Check(b.Context(), cr); resp.GetOkResponse() == nil {
		b.Fatalf("not allowed: %v", resp)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		c := investigator
		c.user = "u-bench-" + strconv.Itoa(i)
		headers["authorization"] = "Bearer " + w.token(c)
		b.StartTimer()
		if resp, _ := w.ext.Check(b.Context(), cr); resp.GetOkResponse() == nil {
			b.Fatalf("subject %d not allowed: %v", i, resp)
		}
	}
}
