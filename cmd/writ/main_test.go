package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/server"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestInspectExample(t *testing.T) {
	code, out, errOut := runCLI(t, "", "inspect", "-example", "a2a-1.0-send")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got server.InspectResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	r := got.Request
	if r == nil || r.Operation != "send" || r.Protocol.Version != "1.0" || r.Classification != "restricted" ||
		r.ContextID != "ctx-pmt-771" || r.Push == nil || r.Push.URL != "https://agents.bank.ae/cb" {
		t.Fatalf("request = %+v", r)
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, "cb-credential") {
		t.Fatalf("a push secret is printed:\n%s", out)
	}
}

func TestInspectFault(t *testing.T) {
	code, out, _ := runCLI(t, "", "inspect", "-example", "a2a-1.0-bad-version")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var got server.InspectResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if got.Answer != nil {
		_ = json.Compact(&body, got.Answer.Body)
	}
	if got.Fault == nil || got.Fault.Kind != "version_not_supported" ||
		!strings.Contains(body.String(), `"code":-32009`) || !strings.Contains(body.String(), `"id":2`) {
		t.Fatalf("output = %s", out)
	}
}

func TestInspectFileStdinAndFlags(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/a2a/v0.3/jsonrpc/send_file.request.http")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, string(raw), "inspect", "-file", "-")
	if code != 0 || !strings.Contains(out, `"file_uris": [`) {
		t.Fatalf("stdin: exit %d %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "", "inspect", "-file", "../../testdata/a2a/v1.0/rest/get.request.http")
	if code != 0 || !strings.Contains(out, `"operation": "get"`) {
		t.Fatalf("file: exit %d %s", code, out)
	}
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://files.bank.ae/a.pdf","mediaType":"application/pdf"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "", "inspect", "-path", "/wholesale/message:send", "-header", "A2A-Version: 1.0", "-body", body)
	if code != 0 || !strings.Contains(out, `"tenant": "wholesale"`) || !strings.Contains(out, `"file": 1`) {
		t.Fatalf("flags: exit %d %s %s", code, out, errOut)
	}
	// The size limit applies to -body too, as the protocol's error.
	code, out, _ = runCLI(t, "", "inspect", "-path", "/message:send", "-header", "A2A-Version: 1.0", "-body", body, "-max-body", "10")
	if code != 1 || !strings.Contains(out, `"status": 413`) {
		t.Fatalf("limit: exit %d %s", code, out)
	}
}

func TestInspectUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"inspect"},
		{"inspect", "-file", "x", "-path", "/"},
		{"inspect", "-example", "nope"},
		{"inspect", "-file", "/does/not/exist"},
		{"inspect", "-path", "/", "-header", "no-colon"},
		{"inspect", "-path", "/", "-protocol", "smtp"},
		{"frobnicate"},
		{},
	} {
		if code, _, errOut := runCLI(t, "", args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if code, out, _ := runCLI(t, "", "inspect", "-example", "list"); code != 0 || !strings.Contains(out, "a2a-1.0-send") {
		t.Errorf("list: %d %s", code, out)
	}
	if code, out, _ := runCLI(t, "", "version"); code != 0 || !strings.HasPrefix(out, "writ ") {
		t.Errorf("version: %d %s", code, out)
	}
}

func TestInspectACP(t *testing.T) {
	code, out, errOut := runCLI(t, "", "inspect", "-example", "acp-run-stream")
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var got server.InspectResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	r := got.Request
	if r == nil || r.Operation != "stream" || r.Protocol.Name != "acp" || r.Agent != "kyc-refresh-agent" ||
		r.Classification != "confidential" || r.ContextID != "ctx-pmt-771" {
		t.Fatalf("request = %+v", r)
	}
}
