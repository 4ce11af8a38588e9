package task_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-authz/writ/task"
)

func TestPushConfigJSONHidesSecrets(t *testing.T) {
	const token, creds = "tok-SECRET-1234", "Basic c2VjcmV0OnB3"
	tests := []struct {
		name             string
		p                task.PushConfig
		hasTok, hasCreds bool
	}{
		{"both", task.PushConfig{ID: "p1", URL: "https://cb.test/x", Token: token, AuthScheme: "Bearer", Credentials: creds}, true, true},
		{"token only", task.PushConfig{URL: "https://cb.test/x", Token: token}, true, false},
		{"credentials only", task.PushConfig{URL: "https://cb.test/x", Credentials: creds}, false, true},
		{"neither", task.PushConfig{URL: "https://cb.test/x"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(t *testing.T, b []byte) {
				s := string(b)
				for _, secret := range []string{token, creds, "c2VjcmV0", "SECRET"} {
					if strings.Contains(s, secret) {
						t.Errorf("JSON leaks %q: %s", secret, s)
					}
				}
				for _, key := range []string{`"token"`, `"Token"`, `"credentials"`, `"Credentials"`} {
					if strings.Contains(s, key) {
						t.Errorf("JSON has key %s: %s", key, s)
					}
				}
			}
			b, err := json.Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			check(t, b)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m["has_token"] != tt.hasTok {
				t.Errorf("has_token = %v, want %v (%s)", m["has_token"], tt.hasTok, b)
			}
			if m["has_credentials"] != tt.hasCreds {
				t.Errorf("has_credentials = %v, want %v (%s)", m["has_credentials"], tt.hasCreds, b)
			}
			if m["url"] != tt.p.URL {
				t.Errorf("url = %v, want %q", m["url"], tt.p.URL)
			}
			if tt.p.ID != "" && m["id"] != tt.p.ID {
				t.Errorf("id = %v, want %q", m["id"], tt.p.ID)
			}
			if tt.p.AuthScheme != "" && m["auth_scheme"] != tt.p.AuthScheme {
				t.Errorf("auth_scheme = %v, want %q", m["auth_scheme"], tt.p.AuthScheme)
			}

			// Through a pointer inside a Request too.
			rb, err := json.Marshal(task.Request{Operation: task.OpPushSet, Push: &tt.p})
			if err != nil {
				t.Fatal(err)
			}
			check(t, rb)
			var req struct {
				Push map[string]any `json:"push"`
			}
			if err := json.Unmarshal(rb, &req); err != nil {
				t.Fatal(err)
			}
			if req.Push["has_token"] != tt.hasTok || req.Push["has_credentials"] != tt.hasCreds {
				t.Errorf("request push = %v, want has_token=%v has_credentials=%v", req.Push, tt.hasTok, tt.hasCreds)
			}
		})
	}
}

func TestPushConfigJSONExact(t *testing.T) {
	b, err := json.Marshal(task.PushConfig{ID: "c", URL: "u", Token: "t", AuthScheme: "s", Credentials: "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c","url":"u","auth_scheme":"s","has_token":true,"has_credentials":true}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestOperationFollowUp(t *testing.T) {
	tests := []struct {
		op   task.Operation
		name string
		want bool
	}{
		{task.OpSend, "send", false},
		{task.OpStream, "stream", false},
		{task.OpGet, "get", true},
		{task.OpList, "list", false},
		{task.OpCancel, "cancel", true},
		{task.OpSubscribe, "subscribe", true},
		{task.OpPushSet, "push_config.set", true},
		{task.OpPushGet, "push_config.get", true},
		{task.OpPushList, "push_config.list", true},
		{task.OpPushDelete, "push_config.delete", true},
		{task.OpCard, "card", false},
		{task.OpExtendedCard, "card.extended", false},
		{task.OpDiscover, "discover", false},
		{"", "", false},
		{"GET", "GET", false},
	}
	for _, tt := range tests {
		if string(tt.op) != tt.name {
			t.Errorf("operation constant %q, want %q", tt.op, tt.name)
		}
		if got := tt.op.FollowUp(); got != tt.want {
			t.Errorf("%q.FollowUp() = %v, want %v", tt.op, got, tt.want)
		}
	}
}

func TestFaultError(t *testing.T) {
	tests := []struct {
		name string
		f    *task.Fault
		want string
	}{
		{"no denials", task.NewFault(task.KindMalformed, "bad json"), "malformed: bad json"},
		{"one denial", &task.Fault{Kind: task.KindDenied, Message: "policy denied", Denials: []task.Denial{{Code: "tenant_mismatch", Reason: "r"}}},
			"denied: policy denied [tenant_mismatch]"},
		{"three denials", &task.Fault{Kind: task.KindDenied, Message: "nope", Denials: []task.Denial{
			{Code: "tenant_mismatch", Reason: "a"}, {Code: "classification_too_high", Reason: "b"}, {Code: "chain_too_long", Reason: "c"}}},
			"denied: nope [tenant_mismatch, classification_too_high, chain_too_long]"},
		{"unauthenticated", &task.Fault{Kind: task.KindUnauthenticated, Message: "who are you", Denials: []task.Denial{{Code: "no_identity"}}},
			"unauthenticated: who are you [no_identity]"},
		{"empty denials slice", &task.Fault{Kind: task.KindDenied, Message: "m", Denials: []task.Denial{}}, "denied: m"},
		{"empty message", task.NewFault(task.KindInternal, ""), "internal: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error = tt.f
			if got := err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
			for _, d := range tt.f.Denials {
				if d.Reason != "" && strings.Contains(err.Error(), d.Reason+"]") {
					t.Errorf("Error() includes reason %q; it should list codes", d.Reason)
				}
			}
		})
	}
	f := task.NewFault(task.KindTooLarge, "x")
	if f.Kind != task.KindTooLarge || f.Message != "x" || f.Code != 0 || f.Denials != nil {
		t.Errorf("NewFault = %+v", f)
	}
}
