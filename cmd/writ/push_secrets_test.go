package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/devidp"
)

// TestPushURLSecretsStayOutOfTheLogs: a real `writ serve` with its decision
// log in a file is sent push configs whose URLs carry a secret in their
// userinfo, path, query and fragment: one without a token
// (CALLBACK_UNAUTHENTICATED), one to a host off the allow-list
// (CALLBACK_NOT_ALLOWED), one allowed and delivered, and one allowed whose
// userinfo the dial guard refuses. Once every decision and delivery is
// logged, neither the decision log nor writ's own log holds any secret.
//
// Threat: a credential carried in a callback URL (a webhook's signature in
// its query, user:password) is written to the decision log or writ's log,
// where every log reader and shipper sees it. Defence: the policy input
// carries the callback's origin only, the shipped reasons name the host,
// push lines and log lines name the receiver's host, and refusals do not
// quote the URL.
func TestPushURLSecretsStayOutOfTheLogs(t *testing.T) {
	w := startFaultWrit(t, fwOptions{decisionLog: true, extra: "push: {trusted_hosts: [127.0.0.1], max_attempts: 1}\n"})
	sink := newPushSink(t, false)
	tok := w.tok(devidp.Caller{Agent: "push-bot", User: "u-p", Tenant: "wholesale", Classification: "internal", Scope: "delegate"})
	secrets := []string{"s3cret-user", "s3cret-pass", "s3cret-path", "s3cret-query", "s3cret-frag", "s3cret-token"}
	carry := func(origin string) string {
		return "http://s3cret-user:s3cret-pass@" + origin + "/cb/s3cret-path?sig=s3cret-query#s3cret-frag"
	}
	for _, c := range []struct {
		name  string
		push  map[string]any
		allow bool
	}{
		{"no token", map[string]any{"url": carry(sink.addr)}, false},
		{"host off the list", map[string]any{"url": carry("evil.example"), "token": "s3cret-token"}, false},
		{"delivered", map[string]any{"url": "http://" + sink.addr + "/cb/s3cret-path?sig=s3cret-query#s3cret-frag", "token": "s3cret-token"}, true},
		{"userinfo refused at dial", map[string]any{"url": carry(sink.addr), "token": "s3cret-token"}, true},
	} {
		st, body, err := w.send(t.Context(), tok, map[string]any{"pushNotificationConfig": c.push})
		if err != nil || completed(st, body, err) != c.allow {
			t.Fatalf("%s: %d %v %s", c.name, st, err, body)
		}
		for _, s := range secrets {
			if strings.Contains(string(body), s) && s != "s3cret-token" {
				t.Errorf("%s: the answer quotes %q: %s", c.name, s, body)
			}
		}
	}
	// Two denials, two allowed decisions, and each allowed task's push
	// outcome: delivered, and failed (the guard refuses userinfo).
	waitUntil(t, "the decision log lines", 30*time.Second, func() bool {
		lines, err := w.DecisionLines()
		if err != nil {
			return false
		}
		var denied, delivered, failed int
		for _, l := range lines {
			switch {
			case l.Type == "decision" && !l.Allow:
				denied++
			case l.Type == "push_delivered":
				delivered++
			case l.Type == "push_failed":
				failed++
			}
		}
		return denied >= 2 && delivered >= 1 && failed >= 1
	})
	raw, err := os.ReadFile(w.DecisionLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "CALLBACK_UNAUTHENTICATED") || !strings.Contains(string(raw), "CALLBACK_NOT_ALLOWED") {
		t.Fatalf("the decision log lacks the denials:\n%s", raw)
	}
	for _, s := range secrets {
		for name, text := range map[string]string{"the decision log": string(raw), "writ's log": w.Log()} {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s holds %q: …%s…", name, s, text[max(0, i-200):min(len(text), i+100)])
			}
		}
	}
}
