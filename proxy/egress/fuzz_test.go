package egress

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzIncoming: the door's reading of a request target never panics, and a
// call it maps names a target by a plain path segment with the rest of the
// path below it, exactly as sent: /to/{name}{rest}.
func FuzzIncoming(f *testing.F) {
	for _, s := range []string{"/to/a/", "/to/a", "/to/a/v1/message:send", "/to//x", "/to/%2e%2e/x", "/to/../x",
		"/.well-known/writ/directory", "/to/a%2Fb/c", "/to/a/b?c=d", "/x", "", "/to/", "/to/a\\b"} {
		f.Add(s)
	}
	s := &Server{}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		r := &http.Request{Method: "POST", URL: u, RequestURI: target, Header: http.Header{}, Host: "127.0.0.1:1"}
		inc, ok := s.incoming(r)
		if !ok || inc.Route == "" {
			return
		}
		raw, _, _ := strings.Cut(target, "?")
		if strings.ContainsAny(inc.Route, "/%\\") || inc.Route == "." || inc.Route == ".." {
			t.Fatalf("%q: the target name %q is not a plain segment", target, inc.Route)
		}
		if got := targetPrefix + inc.Route + inc.RawPath; got != raw && got != raw+"/" {
			t.Fatalf("%q: mapped to %q + %q", target, inc.Route, inc.RawPath)
		}
		if !strings.HasPrefix(inc.Path, "/") || inc.Egress == nil {
			t.Fatalf("%q: path %q", target, inc.Path)
		}
	})
}
