package authz

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// The secrets a push URL may carry, one per part a URL has besides its origin.
var urlSecrets = []string{"s3cret-user", "s3cret-pass", "s3cret-path", "s3cret-query", "s3cret-frag"}

// secretURL is a callback URL on host that carries every urlSecret: in its
// userinfo, path, query and fragment.
func secretURL(scheme, host string) string {
	return scheme + "://s3cret-user:s3cret-pass@" + host + "/hooks/s3cret-path?sig=s3cret-query#s3cret-frag"
}

// shippedCodes are the denial codes the shipped policy's rules produce, read
// from its files: a rule added later is covered without editing this test.
func shippedCodes(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(shipped, "*.rego"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"code":\s*"([A-Z_]+)"`)
	codes := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rego") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
			codes[m[1]] = true
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d codes in the shipped policy", len(codes))
	}
	return codes
}

// TestPushURLSecretsReachNoReason: over requests that make every shipped rule
// deny (every operation, every kind of caller and target, callbacks off the
// allow-list, over http, without a token), with a push URL that carries a
// secret in its userinfo, path, query and fragment, no denial reason quotes
// any of them, and the input the policy reads holds none of them either.
//
// Threat: a credential in a callback URL (a signed webhook's query, a
// user:password) reaches the decision log, and every log reader, through a
// reason that quotes the URL. Defence: the policy input carries the
// callback's origin only (input.push.url is scheme://host[:port]), so no rule,
// shipped or custom, can quote the rest; the shipped reasons quote the host.
func TestPushURLSecretsReachNoReason(t *testing.T) {
	ctx := context.Background()
	p := loadShipped(t)
	want := shippedCodes(t)
	noScope, deep, cyclic, retail := investigator, investigator, investigator, investigator
	noScope.Scopes = nil
	deep.Chain = []string{"a", "b", "c", "d"}
	cyclic.Chain = []string{"sanctions-screening-agent"}
	retail.Tenant = "corporate"
	widened := investigator // a hop was granted less than the caller holds
	widened.Hops = []identity.Hop{{AgentID: "orchestrator", Scopes: []string{"read"}, HasScopes: true, Classification: "internal"},
		{AgentID: investigator.AgentID, Scopes: investigator.Scopes, HasScopes: true}}
	callers := []identity.Caller{investigator, identity.Anonymous(), noScope, deep, cyclic, retail, widened,
		{Authenticated: true, Method: "static", AgentID: "dev-bot", Tenant: "retail"}}
	targets := []*Target{sanctions, kyc, marketing, nil}
	ops := []task.Operation{task.OpSend, task.OpStream, task.OpGet, task.OpCancel, task.OpSubscribe, task.OpPushSet,
		task.OpPushGet, task.OpCard, task.OpDiscover}
	pushes := []*task.PushConfig{
		{URL: secretURL("https", "agents.bank.ae")}, // allowed host, no token
		{URL: secretURL("https", "evil.example"), Token: "t"},
		{URL: secretURL("http", "agents.bank.ae"), Token: "t"},
		{URL: secretURL("http", "Evil.Example:8443")},
		{URL: "https://s3cret-user@agents.bank.ae"}, // userinfo alone
		{URL: "not a url s3cret-path"},
	}
	foreign := &task.Task{State: task.Running, Owner: task.Owner{AgentID: "kyc-refresh-agent", Tenant: "wholesale", UserID: "u-1"}}
	rng := rand.New(rand.NewPCG(5, 2026))
	seen := map[string]bool{}
	for i := range 3000 {
		f := &Facts{Request: sendRequest(), Caller: callers[rng.IntN(len(callers))], Target: targets[rng.IntN(len(targets))],
			HTTP: HTTPInfo{Method: "POST", Path: "/", Host: "agent.bank.ae", RemoteAddr: "127.0.0.1:40000"}}
		f.Request.Operation, f.Request.Push = ops[rng.IntN(len(ops))], pushes[rng.IntN(len(pushes))]
		if rng.IntN(3) == 0 {
			f.Request.TaskID, f.Record = "t-1", foreign
		}
		if rng.IntN(4) == 0 {
			f.Request.Classification = task.Restricted
		}
		in := BuildInput(f)
		doc, err := json.Marshal(in.Push)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range urlSecrets {
			if strings.Contains(string(doc), s) {
				t.Fatalf("input %d: input.push carries %q: %s", i, s, doc)
			}
		}
		d, err := evaluate(ctx, p, in)
		if err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
		for _, den := range d.Denials {
			seen[den.Code] = true
			for _, s := range urlSecrets {
				if strings.Contains(den.Reason, s) {
					t.Fatalf("input %d: %s quotes %q: %s", i, den.Code, s, den.Reason)
				}
			}
		}
	}
	for code := range want {
		if !seen[code] {
			t.Errorf("no request made the shipped policy deny with %s: the test does not cover that rule", code)
		}
	}
}
