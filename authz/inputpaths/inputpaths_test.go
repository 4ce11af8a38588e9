package inputpaths

import (
	"strings"
	"testing"
)

// TestCheck: every member path, and any claim, is a member; what is not
// is refused with the member meant, or the members there are.
func TestCheck(t *testing.T) {
	for _, p := range append(Paths(), "caller.claims.email", "caller.claims.act.sub") {
		if err := Check(Prefix + p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if len(Paths()) < 50 || Paths()[0] != "version" {
		t.Fatalf("paths %v", Paths())
	}
	for path, want := range map[string]string{
		"input.caller.sub":       "did you mean input.caller.claims.sub?",
		"input.target.nam":       "did you mean input.target.name?",
		"input.operations":       "did you mean input.operation?",
		"input.push.zzz":         "input.push has url, scheme, host, port, has_token, auth_scheme",
		"task.id":                "does not start with input. (did you mean input.task.id?)",
		"nothing":                "does not start with input.",
		"input.caller.claims":    "",
		"input.caller.claims.":   "names no member",
		"input.task.owner.x.y":   "names no member",
		"input.egress.root.deep": "names no member",
	} {
		err := Check(path)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", path, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
	if err := CheckMask("input.version"); err == nil || !strings.Contains(err.Error(), "cannot be masked") {
		t.Errorf("version masked: %v", err)
	}
}
