package replay

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

const inputV1 = `{"version":"writ/v1","operation":"send","caller":{"agent_id":"a"},"target":{"name":"t"}}`

// TestParse: a decision line of either format gives its logged decision (in
// dry-run mode the policy's denial, not the pass), its caller, target and
// input; other lines are told apart, never guessed at.
func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		line              string
		kind              kind
		allow, input      bool
		caller, target    string
		codes             []string
		version, revision string
	}{
		"writ allowed": {line: `{"time":"2026-01-01T00:00:00Z","type":"decision","decision_id":"d","route":"r","caller":{"authenticated":true,"agent_id":"a"},"allow":true,"policy_revision":"rev","input_version":"writ/v1","input":` + inputV1 + `,"seq":2,"prev":"x"}`,
			kind: isDecision, allow: true, input: true, caller: "a", target: "r", codes: []string{}, version: "writ/v1", revision: "rev"},
		"writ dry run": {line: `{"time":"2026-01-01T00:00:00Z","type":"decision","route":"r","allow":true,"dry_run":true,"denials":[{"code":"DEPTH_EXCEEDED"}],"input_version":"writ/v1","input":` + inputV1 + `}`,
			kind: isDecision, input: true, target: "r", codes: []string{"DEPTH_EXCEEDED"}, version: "writ/v1"},
		"writ egress": {line: `{"time":"2026-01-01T00:00:00Z","type":"decision","route":"caller-agent","target":"called","allow":true}`,
			kind: isDecision, allow: true, target: "called", codes: []string{}},
		"writ v9": {line: `{"time":"2026-01-01T00:00:00Z","type":"decision","allow":true,"input_version":"writ/v9","input":{"shape":["new"]}}`,
			kind: isDecision, allow: true, codes: []string{}, version: "writ/v9"},
		"opa dry run": {line: `{"decision_id":"d","timestamp":"2026-01-01T00:00:00Z","path":"writ/authz/decision","input":{"route":"r","caller":{"authenticated":true,"agent_id":"a"}},"result":{"allow":true},"revision":"rev","error":{"code":"internal_error","message":"x"},"custom":{"dry_run":true,"input_version":"writ/v1","input":` + inputV1 + `}}`,
			kind: isDecision, input: true, caller: "a", target: "r", codes: []string{}, version: "writ/v1", revision: "rev"},
		"lifecycle":  {line: `{"time":"2026-01-01T00:00:00Z","type":"task_created","task_id":"t"}`, kind: notDecision},
		"checkpoint": {line: `{"time":"2026-01-01T00:00:00Z","type":"checkpoint","seq":3,"prev":"x"}`, kind: notDecision},
		"torn":       {line: `{"time":"2026-01-01T00:00:00Z","type":"deci`, kind: notJSON},
		"array":      {line: `[1,2]`, kind: notJSON},
	} {
		d, in, k := parse([]byte(tc.line))
		if k != tc.kind {
			t.Errorf("%s: kind %v, want %v", name, k, tc.kind)
			continue
		}
		if k != isDecision {
			continue
		}
		caller := ""
		if d.caller != nil {
			caller = d.caller.AgentID
		}
		if d.allow != tc.allow || (in != nil) != tc.input || caller != tc.caller || d.target != tc.target ||
			!slices.Equal(d.codes, tc.codes) || d.version != tc.version || d.revision != tc.revision {
			t.Errorf("%s: %+v, input %v", name, d, in)
		}
		if in != nil && (in.Caller.AgentID != "a" || in.Target.Name != "t") {
			t.Errorf("%s: input %+v", name, in)
		}
	}
}

// TestReadLine: a line longer than the bound is read through and dropped,
// and the next line is read whole; a last line without a newline is read.
func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	r := bufio.NewReaderSize(strings.NewReader("one\r\n"+long+"\ntwo\nlast"), 4096)
	var got []string
	for {
		b, err := readLine(r, nil)
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errTooLong) {
			got = append(got, "(too long)")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	if want := []string{"one", "(too long)", "two", "last"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}
