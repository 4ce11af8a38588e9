package canonical

import (
	"net/url"
	"strings"
	"testing"

	"github.com/writ-authz/writ/proxy/extproc/extproctest"
)

// TestCanonicalForm: the one spelling of a path and a host writ routes on,
// and each other spelling named.
func TestForm(t *testing.T) {
	for path, want := range map[string]string{
		"/":                       "",
		"/kyc":                    "",
		"/kyc/":                   "",
		"/kyc/tasks/t-1:cancel":   "",
		"/kyc/a%20b":              "", // a space must be encoded
		"/kyc/a%3ab%3A":           "", // reserved, either hex case
		"/%6Byc/":                 "a percent-encoded unreserved character",
		"/kyc/%7E":                "a percent-encoded unreserved character",
		"/kyc/%2E%2E/":            "a percent-encoded unreserved character",
		"/kyc%2F..":               "an encoded slash",
		"/kyc%2f":                 "an encoded slash",
		"/kyc%5C":                 "an encoded slash",
		"/kyc\\..\\":              "a backslash",
		"/kyc/../":                "a dot segment",
		"/kyc/..":                 "a dot segment",
		"/./kyc":                  "a dot segment",
		"//kyc/":                  "an empty segment (//)",
		"/kyc//x":                 "an empty segment (//)",
		"/kyc%":                   "malformed percent-encoding",
		"/kyc%4":                  "malformed percent-encoding",
		"/kyc%zz":                 "malformed percent-encoding",
		"kyc":                     "the path does not start with /",
		"/kyc/..x/.x/x./...":      "",
		"/tasks/t-1/pushConfigs/": "",
	} {
		if got := Path(path); got != want {
			t.Errorf("path %q: %q, want %q", path, got, want)
		}
	}
	for host, want := range map[string]string{
		"kyc.example":       "",
		"kyc.example:8443":  "",
		"[::1]:8080":        "",
		"":                  "",
		"kyc.example.":      "a trailing dot",
		"kyc.example.:8443": "a trailing dot",
		"KYC.example":       "upper-case letters in the host",
		"kyc.example:":      "the port is not digits",
		"kyc.example:x1":    "the port is not digits",
	} {
		if got := Host(host); got != want {
			t.Errorf("host %q: %q, want %q", host, got, want)
		}
	}
}

// FuzzCanonicalPath: a path writ accepts as canonical is one every reading
// agrees on — Envoy's normalisation (extproctest's model of normalize_path,
// merge_slashes and escaped-slash rejection) leaves it as it is (but for the
// case of its escapes' hex digits, which decode alike), and a route
// covers its raw form (Envoy's path_separated_prefix) exactly when it covers
// its decoded form (how writ matches) — so no router in front can send it to
// another agent than writ decides for.
func FuzzCanonicalPath(f *testing.F) {
	for _, s := range []string{"/", "/kyc", "/kyc/", "/%6Byc/", "/kyc/../", "//kyc/", "/kyc%2F..", "/kyc%3A/x",
		"/kyc%20", "/kycx", "/k%79c/t", "/kyc\\x", "/kyc/%2e"} {
		f.Add(s)
	}
	envoy := &extproctest.Envoy{Normalize: true}
	f.Fuzz(func(t *testing.T, raw string) {
		if Path(raw) != "" || strings.ContainsAny(raw, "?#") {
			return
		}
		if got := envoy.Routing("h", raw); got.Rejected || got.Target != upperEscapes(raw) {
			t.Fatalf("canonical %q: Envoy normalises it to %q (rejected %v)", raw, got.Target, got.Rejected)
		}
		decoded, err := url.PathUnescape(raw)
		if err != nil {
			t.Fatalf("canonical %q does not decode: %v", raw, err)
		}
		_, writ := Below("/kyc", decoded)
		if envoyMatch := raw == "/kyc" || strings.HasPrefix(raw, "/kyc/"); envoyMatch != writ {
			t.Fatalf("canonical %q: Envoy's /kyc route %v, writ's %v", raw, envoyMatch, writ)
		}
	})
}

// upperEscapes is raw with the hex digits of its escapes in upper case.
func upperEscapes(raw string) string {
	b := []byte(raw)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			copy(b[i+1:i+3], strings.ToUpper(string(b[i+1:i+3])))
			i += 2
		}
	}
	return string(b)
}
