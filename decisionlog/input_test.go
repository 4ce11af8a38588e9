package decisionlog

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/task"
)

// loggedInput is a decision's input as the core puts it on the event, with
// masks.
func loggedInput(t testing.TB, masks ...string) (*authz.Input, authz.LoggedInput) {
	t.Helper()
	in := authz.BuildInput(&authz.Facts{
		Request: &task.Request{Operation: task.OpSend, Protocol: task.Protocol{Name: "a2a", Version: "1.0", Binding: task.BindingJSONRPC, Method: "SendMessage"},
			TaskID: "task-1", ContextID: "ctx-1"},
		Caller: identity.Caller{Authenticated: true, Method: "jwt", Issuer: "https://idp.bank.example", AgentID: "kyc-orchestrator",
			UserID: "analyst-7", Tenant: "retail", Scopes: []string{"delegate"}, Chain: []string{"case-intake"},
			Claims: map[string]any{"sub": "analyst-7", "email": "analyst7@bank.example"}},
		Target: &authz.Target{Name: "sanctions-screener", Tenants: []string{"retail"}, MaxClassification: task.Restricted},
		HTTP:   authz.HTTPInfo{Method: "POST", Path: "/", Host: "writ", RemoteAddr: "10.0.0.7:5555"}})
	l, err := authz.NewInputLog(masks)
	if err != nil {
		t.Fatal(err)
	}
	return in, l.Of(in)
}

// TestDecisionLineInput: with the input on its event, a decision line (writ
// and OPA formats) carries the input's version, the masks and the input
// itself, which decodes into the policy input it was decided on, less what
// was masked; a line still fits Line exactly.
func TestDecisionLineInput(t *testing.T) {
	in, li := loggedInput(t, "input.caller.claims.email", "input.request.source_address")
	for _, format := range []string{"writ", "opa"} {
		t.Run(format, func(t *testing.T) {
			var buf syncbuf.Buffer
			l := mustWriter(t, &buf, config.DecisionLog{Format: format}, options{now: fixedNow})
			ev := allowEvent()
			ev.Input = li
			l.Decided(ev)
			closeLog(t, l)
			lines := eventLines(buf.String())
			if len(lines) != 1 {
				t.Fatalf("lines %v", lines)
			}
			raw := []byte(lines[0])
			var ln Line
			if format == "opa" {
				var opa struct {
					Custom Line `json:"custom"`
				}
				if err := json.Unmarshal(raw, &opa); err != nil {
					t.Fatal(err)
				}
				ln = opa.Custom
			} else {
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&ln); err != nil {
					t.Fatalf("decode into Line: %v", err)
				}
			}
			if ln.InputVersion != authz.InputVersion || !slices.Equal(ln.InputMasked, []string{"input.caller.claims.email", "input.request.source_address"}) {
				t.Errorf("version %q, masked %v", ln.InputVersion, ln.InputMasked)
			}
			var got authz.Input
			if err := json.Unmarshal(ln.Input, &got); err != nil {
				t.Fatalf("input: %v: %s", err, ln.Input)
			}
			want := *in
			want.Caller.Claims = map[string]any{"sub": "analyst-7"}
			want.Request.SourceAddress = ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("input\n%+v\nwant\n%+v", got, want)
			}
			if strings.Contains(lines[0], "analyst7@bank.example") || strings.Contains(lines[0], "10.0.0.7") {
				t.Errorf("a masked member is on the line: %s", lines[0])
			}
		})
	}
}

// TestVerifyWithInput: a signed log whose decision lines carry their input
// verifies as any other (writ report -verify), and a byte changed inside an
// input is found on its line.
func TestVerifyWithInput(t *testing.T) {
	priv, pub := keyFiles(t, "EdDSA")
	keys := loadKeys(t, pub)
	_, li := loggedInput(t)
	for _, format := range []string{"writ", "opa"} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "decisions.log")
			l, err := newLog(config.DecisionLog{Output: path, Format: format, CheckpointEvery: 4, SigningKeyFile: priv}, options{})
			if err != nil {
				t.Fatal(err)
			}
			for range 9 {
				ev := allowEvent()
				ev.Input = li
				l.Decided(ev)
			}
			closeLog(t, l)
			v, err := Verify([]string{path}, keys)
			if err != nil || !v.OK() {
				t.Fatalf("a log with inputs does not verify: %v %+v", err, v.Failure)
			}
			ls := readLines(t, path)
			i := slices.IndexFunc(ls, func(s string) bool { return strings.Contains(s, `"input_version"`) })
			bad := slices.Clone(ls)
			bad[i+2] = strings.Replace(bad[i+2], `"tenant":"retail"`, `"tenant":"wholesale"`, 1)
			if bad[i+2] == ls[i+2] {
				t.Fatal("the edit changed nothing")
			}
			writeLines(t, path+".bad", bad)
			wantFailure(t, verifyFails(t, keys, path+".bad"), path+".bad", i+3, "edited")
		})
	}
}

// BenchmarkEncodeDecisionInput is BenchmarkEncodeDecision for a line that
// carries its policy input (decision_log.include_input): the writer
// goroutine's cost for one line, encoding and digest.
func BenchmarkEncodeDecisionInput(b *testing.B) {
	ev := allowEvent()
	_, ev.Input = loggedInput(b, "input.caller.claims.email")
	buf := make([]byte, 0, 4096)
	var c chainState
	b.ReportAllocs()
	for b.Loop() {
		s := c.next()
		buf = appendDecision(buf[:0], &ev, &s)
		c.advance(buf)
	}
	b.SetBytes(int64(len(buf)))
}
