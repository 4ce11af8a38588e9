package replay_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/server"
)

// TestLoggedInputHoldsNoSecret: with decision_log.include_input on, a real
// writ's decision lines carry the policy input of a send whose message has
// secret text, data, metadata and a presigned file URL, whose push config
// has a token, credentials and a URL with userinfo, path and query, sent
// with a bearer token; none of those reach the log (the file URL and the
// callback keep their origins only), and the log replays.
//
// Threat: a log kept as a replay corpus becomes a store of what callers
// sent: message content, the credential in a presigned URL, a callback's
// token or secret path, the caller's own bearer token, readable by whoever
// reads the audit log. Defence: the input never holds content, tokens or
// credentials (the parts are counted, a callback is its origin and
// has_token), and the record of it cuts every file URI to its origin before
// it is written (authz.InputLog).
func TestLoggedInputHoldsNoSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.DecisionLog.Output, c.DecisionLog.IncludeInput = path, true
	})
	tok := h.Token(proxytest.Investigator)
	msg := proxytest.Msg03("TEXT-SECRET screen Acme", map[string]any{"metadata": map[string]any{"note": "META-SECRET"}})
	msg["parts"] = append(msg["parts"].([]any),
		map[string]any{"kind": "file", "file": map[string]any{"uri": "https://files.bank.example:8443/kyc/FILE-PATH-SECRET.pdf?X-Amz-Signature=URI-SECRET", "mimeType": "application/pdf"}},
		map[string]any{"kind": "data", "data": map[string]any{"iban": "DATA-SECRET"}})
	h.RPC("/", tok, "", "message/send", map[string]any{"message": msg,
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{
			"url":   "https://hook-user:USERINFO-SECRET@agents.bank.ae/cb/CB-PATH-SECRET?sig=CB-QUERY-SECRET",
			"token": "PUSH-TOKEN-SECRET", "authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "CRED-SECRET"}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := string(raw)
	for _, want := range []string{`"input_version":"writ/v1"`, `"file_uris":["https://files.bank.example:8443"]`,
		`"push":{"url":"https://agents.bank.ae","scheme":"https","host":"agents.bank.ae","port":443,"has_token":true`, `"parts":{"text":1,"file":1,"data":2}`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the log lacks %s (the test would prove nothing):\n%s", want, out)
		}
	}
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	for _, secret := range []string{tok, sig, "TEXT-SECRET", "META-SECRET", "FILE-PATH-SECRET", "URI-SECRET", "DATA-SECRET",
		"USERINFO-SECRET", "hook-user", "CB-PATH-SECRET", "CB-QUERY-SECRET", "PUSH-TOKEN-SECRET", "CRED-SECRET"} {
		if strings.Contains(out, secret) {
			t.Errorf("the decision log holds %q", secret)
		}
	}
	im, err := server.Replay(t.Context(), server.ReplayRequest{Logs: []string{path}, Policies: []string{proxytest.Policies()}})
	if err != nil || im.Replayed != 1 || im.Unchanged != 1 {
		t.Errorf("replay: %v, %+v", err, im)
	}
}
