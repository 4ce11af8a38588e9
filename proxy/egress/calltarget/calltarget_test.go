package calltarget

import (
	"net/url"
	"strings"
	"testing"
)

// TestParse: each kind of call, and the spellings of a name that are no
// target.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want Call
		ok   bool
	}{
		{"/to/a/v1/message:send", Call{Name: "a", RawPath: "/v1/message:send", Path: "/v1/message:send"}, true},
		{"/to/a", Call{Name: "a", RawPath: "/", Path: "/"}, true},
		{"/to/a/x%20y", Call{Name: "a", RawPath: "/x%20y", Path: "/x y"}, true},
		{DirectoryPath, Call{Directory: true}, true},
		{"/card/https:%2F%2Fb.example%2Fcard.json/v1/message:send",
			Call{CardURL: "https://b.example/card.json", RawPath: "/v1/message:send", Path: "/v1/message:send"}, true},
		{"/to//x", Call{}, false}, {"/to/../x", Call{}, false}, {"/to/%61/x", Call{}, false},
		{"/to/a\\b", Call{}, false}, {"/card//x", Call{}, false}, {"/card/%zz/x", Call{}, false}, {"/x", Call{}, false},
	} {
		decoded, err := url.PathUnescape(c.raw)
		if err != nil {
			decoded = c.raw
		}
		got, ok := Parse(c.raw, decoded)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: %+v %v, want %+v %v", c.raw, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParse: the reading of a call's target never panics, and a call by
// name names a plain path segment with the rest of the path below it,
// exactly as sent: /to/{name}{rest}.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"/to/a/", "/to/a", "/to/a/v1/message:send", "/to//x", "/to/%2e%2e/x", "/to/../x",
		DirectoryPath, "/to/a%2Fb/c", "/x", "", "/to/", "/to/a\\b", "/card/https:%2F%2Fb%2Fc/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		raw, _, _ := strings.Cut(target, "?")
		call, ok := Parse(raw, u.Path)
		if !ok || call.Directory {
			return
		}
		if !strings.HasPrefix(call.Path, "/") || !strings.HasPrefix(call.RawPath, "/") {
			t.Fatalf("%q: paths %q, %q", target, call.RawPath, call.Path)
		}
		if call.CardURL != "" {
			return
		}
		if strings.ContainsAny(call.Name, "/%\\") || call.Name == "" || call.Name == "." || call.Name == ".." {
			t.Fatalf("%q: the target name %q is not a plain segment", target, call.Name)
		}
		if got := TargetPrefix + call.Name + call.RawPath; got != raw && got != raw+"/" {
			t.Fatalf("%q: mapped to %q + %q", target, call.Name, call.RawPath)
		}
	})
}
