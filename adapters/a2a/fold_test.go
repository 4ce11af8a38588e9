package a2a

import (
	"net/http"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// TestUnicodeFoldKeyDifferential: encoding/json matches a key to a field under
// Unicode case folding ("ſ" U+017F folds to "s", "K" U+212A to "k"), the SDKs
// behind writ match keys exactly. A raw (unescaped) folded key must be refused
// like an ASCII case variant, or writ and the agent read different requests.
func TestUnicodeFoldKeyDifferential(t *testing.T) {
	cases := map[string]string{
		// writ would check task "mine", the agent would append to "victim".
		"task_id": `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user",` +
			`"parts":[{"kind":"text","text":"hi"}],"taskId":"victim","taſkId":"mine"}}}`,
		// writ would see no push config (nothing to strip), the agent would see one.
		"push_config": `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user",` +
			`"parts":[{"kind":"text","text":"hi"}]},"configuration":{"pushNotificationConfig":{"url":"http://169.254.169.254/cb"},"puſhNotificationConfig":null}}}`,
		"kelvin": `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user",` +
			`"parts":[{"kind":"text","text":"hi"}],"taskId":"victim","tas` + "\u212a" + `Id":"mine"}}}`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			in := wire.Inbound{Method: http.MethodPost, Path: "/", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
			req, f := Parse(in, Options{})
			if f == nil {
				t.Fatalf("parsed without fault: task %q push %+v", req.TaskID, req.Push)
			}
			if f.Kind != task.KindInvalidParams {
				t.Fatalf("kind = %s (%s), want %s", f.Kind, f.Message, task.KindInvalidParams)
			}
		})
	}
}
