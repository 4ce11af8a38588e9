package envoyreq

import (
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// TestHeaders: raw values win over their string form, repeated headers stay
// apart, pseudo-headers come apart, Host is dropped — as net/http reads them.
func TestHeaders(t *testing.T) {
	hdr, pseudo := Headers(&corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":path", RawValue: []byte("/x?a=1")}, {Key: ":AUTHORITY", Value: "writ.test"},
		{Key: "host", Value: "other"}, {Key: "x-a2a-extensions", RawValue: []byte("urn:a")},
		{Key: "x-a2a-extensions", Value: "urn:b"}, {Key: "writ_caller", RawValue: []byte("forged")}}})
	if pseudo[":path"] != "/x?a=1" || pseudo[":authority"] != "writ.test" {
		t.Errorf("pseudo %v", pseudo)
	}
	if hdr.Get("Host") != "" || !slices.Equal(hdr.Values("X-A2a-Extensions"), []string{"urn:a", "urn:b"}) || hdr.Get("Writ_caller") != "forged" {
		t.Errorf("headers %v", hdr)
	}
	if raw, p, q, ok := SplitTarget("/a%2Fb?x=1&x=2"); !ok || raw != "/a%2Fb" || p != "/a/b" || !slices.Equal(q["x"], []string{"1", "2"}) {
		t.Errorf("%q %q %v %v", raw, p, q, ok)
	}
	for _, bad := range []string{"", "x", "http://h/x"} {
		if _, _, _, ok := SplitTarget(bad); ok {
			t.Errorf("target %q accepted", bad)
		}
	}
	if c := PeerCertificates("", "spiffe://bank.ae/agents/a"); len(c) != 1 || c[0].URIs[0].String() != "spiffe://bank.ae/agents/a" {
		t.Errorf("principal %v", c)
	}
	if c := PeerCertificates("", "CN=not-spiffe"); c != nil {
		t.Errorf("non-SPIFFE principal %v", c)
	}
}
