package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const token = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl"

// summary renders each line as op:kind:state (or op:error:code) for comparison.
func summary(lines []map[string]any) string {
	var b []string
	for _, l := range lines {
		if e, ok := l["error"].(map[string]any); ok {
			b = append(b, fmt.Sprintf("%v:error:%v", l["op"], e["code"]))
			continue
		}
		s := fmt.Sprintf("%v:%v", l["op"], l["kind"])
		if st, ok := l["state"]; ok {
			s += ":" + fmt.Sprint(st)
		}
		if a, ok := l["artifact"]; ok {
			s += ":" + fmt.Sprint(a)
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

func run(t *testing.T, url, scenario, binding string, extra ...string) []map[string]any {
	t.Helper()
	args := append([]string{"--url", url, "--token", token, "--scenario", scenario, "--binding", binding}, extra...)
	lines, err := RunJSClient(t, args...)
	if err != nil {
		t.Fatalf("%s/%s: %v\nlines: %v", scenario, binding, err, lines)
	}
	return lines
}

func TestJSSanctions(t *testing.T) {
	t.Parallel()
	url := StartJSAgent(t, "sanctions", "")
	for _, binding := range []string{"jsonrpc", "rest"} {
		lines := run(t, url, "send", binding, "--beneficiary", "Globex Ltd")
		if got := summary(lines); got != "send:task:completed" {
			t.Fatalf("%s send: %s", binding, got)
		}
		if lines[0]["text"] != "Screening complete." || fmt.Sprint(lines[0]["artifacts"]) != "[sanctions-screening]" {
			t.Fatalf("%s send: %v", binding, lines[0])
		}
		lines = run(t, url, "stream", binding)
		want := "stream:task:submitted stream:status-update:working stream:artifact-update:sanctions-screening stream:status-update:completed"
		if got := summary(lines); got != want {
			t.Fatalf("%s stream:\n got %s\nwant %s", binding, got, want)
		}
		id := lines[0]["taskId"]
		for _, l := range lines {
			if l["taskId"] != id {
				t.Fatalf("%s stream: task ids differ: %v", binding, lines)
			}
		}
	}

	// What reached the agent: the card fetch and the calls, each with the token.
	var methods []string
	for _, o := range JSAgentRequests(t, url) {
		methods = append(methods, o.Method)
		if o.Header.Get("Authorization") != "Bearer "+token {
			t.Fatalf("%s without the bearer token: %v", o.Method, o.Header)
		}
		if o.Method != "GET /.well-known/agent-card.json" && (o.TaskID == "" || o.Header.Get("A2A-Version") != "1.0") {
			t.Fatalf("observed %+v", o)
		}
	}
	want := "GET /.well-known/agent-card.json SendMessage GET /.well-known/agent-card.json SendStreamingMessage"
	if got := strings.Join(methods, " "); got != want+" "+want {
		t.Fatalf("methods seen:\n got %s\nwant %s %s", got, want, want)
	}
}

func TestJSClarifier(t *testing.T) {
	t.Parallel()
	url := StartJSAgent(t, "clarifier", "")
	for _, binding := range []string{"jsonrpc", "rest"} {
		lines := run(t, url, "clarify", binding)
		if got := summary(lines); got != "send:task:input-required reply:task:completed" {
			t.Fatalf("%s: %s", binding, got)
		}
		if lines[0]["text"] != "Which jurisdiction should I screen against?" || lines[1]["text"] != "Screened. No matches." ||
			lines[0]["taskId"] != lines[1]["taskId"] {
			t.Fatalf("%s: %v", binding, lines)
		}
	}
}

func TestJSSlowCancel(t *testing.T) {
	t.Parallel()
	url := StartJSAgent(t, "slow", "")
	for _, binding := range []string{"jsonrpc", "rest"} {
		lines := run(t, url, "cancel", binding)
		want := "stream:task:submitted stream:status-update:working cancel:task:canceled stream:status-update:canceled cancel-again:error:-32002"
		if got := summary(lines); got != want {
			t.Fatalf("%s:\n got %s\nwant %s", binding, got, want)
		}
	}
}

func TestJSCardURL(t *testing.T) {
	t.Parallel()
	url := StartJSAgent(t, "sanctions", "http://127.0.0.1:9/writ/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/.well-known/agent-card.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card struct {
		Name       string `json:"name"`
		Interfaces []struct {
			URL     string `json:"url"`
			Binding string `json:"protocolBinding"`
			Version string `json:"protocolVersion"`
		} `json:"supportedInterfaces"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(card.Interfaces)
	if card.Name != "sanctions-screening-agent" || got != "[{http://127.0.0.1:9/writ/ JSONRPC 1.0} {http://127.0.0.1:9/writ HTTP+JSON 1.0}]" {
		t.Fatalf("card %s %s", card.Name, got)
	}
}

// fakeUpstream serves a 1.0 card pointing at itself and answers every other
// request with status and body (what a sidecar that denies would send).
func fakeUpstream(t *testing.T, status int, contentType, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/agent-card.json" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"deny","description":"d","version":"1","supportedInterfaces":[`+
				`{"url":"%[1]s/","protocolBinding":"JSONRPC","protocolVersion":"1.0"},`+
				`{"url":"%[1]s","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}],`+
				`"capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[]}`, "http://"+r.Host)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestJSClientNon200 pins down how the 1.3.0 client treats error answers with
// a non-200 status, as writ sends them when it denies a call.
func TestJSClientNon200(t *testing.T) {
	t.Parallel()
	EnsureNode(t)
	rpcBody := `{"jsonrpc":"2.0","id":0,"error":{"code":%d,"message":"denied by policy","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"DENIED","domain":"writ"}]}}`
	restBody := `{"error":{"code":403,"status":"PERMISSION_DENIED","message":"denied by policy","details":[]}}`
	for _, tc := range []struct {
		name, binding, scenario, contentType, body string
		code                                       any // want error.code (nil: none)
		errName                                    string
	}{
		// JSON-RPC, 403 with a JSON-RPC error body: the error object is used,
		// code and all, for unary calls and for streams alike.
		{"rpc-403-known-code", "jsonrpc", "send", "application/json", fmt.Sprintf(rpcBody, -32001), -32001.0, "TaskNotFoundError"},
		{"rpc-403-custom-code", "jsonrpc", "send", "application/json", fmt.Sprintf(rpcBody, -32099), -32099.0, "JsonRpcTransportError"},
		{"rpc-403-stream", "jsonrpc", "stream", "application/json", fmt.Sprintf(rpcBody, -32099), -32099.0, "JsonRpcTransportError"},
		// JSON-RPC, 403 with a body that is not JSON: a plain Error, no code.
		{"rpc-403-text", "jsonrpc", "send", "text/plain", "forbidden", nil, "Error"},
		// REST, 403 with {"error":{...}} and no ErrorInfo reason: a generic A2AError.
		{"rest-403", "rest", "send", "application/json", restBody, nil, "A2AError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := fakeUpstream(t, http.StatusForbidden, tc.contentType, tc.body)
			lines, err := RunJSClient(t, "--url", url, "--token", token, "--scenario", tc.scenario, "--binding", tc.binding)
			if err == nil || len(lines) != 1 {
				t.Fatalf("want one error line and a failure, got %v %v", lines, err)
			}
			e, _ := lines[0]["error"].(map[string]any)
			if e == nil || e["code"] != tc.code || e["name"] != tc.errName || e["httpStatus"] != 403.0 {
				t.Fatalf("error line %v", lines[0])
			}
			if tc.code != nil && e["message"] != "denied by policy" {
				t.Fatalf("message %v", e["message"])
			}
		})
	}
}

// TestJSDifferential: the witness records what the SDK's own parsing made of a
// request (1.0 and 0.3, JSON-RPC and REST), and a request the SDK refuses
// before dispatch leaves no record.
func TestJSDifferential(t *testing.T) {
	base := StartJSDifferential(t)
	post := func(id, path, version, body string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Diff-Case", id)
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post("v10", "/", "1.0", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"t-1"}}`)
	post("v03", "/", "", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"taskId":"t-2","contextId":"c-2"},"configuration":{"pushNotificationConfig":{"url":"https://h/cb"}}}}`)
	post("rest", "/tasks/t-3/pushNotificationConfigs", "1.0", `{"id":"cfg","url":"https://h/cb"}`)
	post("refused", "/", "1.0", `{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"t-4"}}`)
	got := JSDifferentialRecords(t, base)
	want := map[string]DiffRecord{
		"v10":  {Op: "cancel", TaskID: "t-1"},
		"v03":  {Op: "send", TaskID: "t-2", ContextID: "c-2", PushURL: "https://h/cb"},
		"rest": {Op: "push_config.set", TaskID: "t-3", PushURL: "https://h/cb", ConfigID: "cfg"},
	}
	if len(got) != len(want) {
		t.Errorf("records for %d cases, want %d: %v", len(got), len(want), got)
	}
	for id, w := range want {
		if len(got[id]) != 1 || got[id][0] != w {
			t.Errorf("%s: %v, want %v", id, got[id], w)
		}
	}
	if again := JSDifferentialRecords(t, base); len(again) != 0 {
		t.Errorf("records not forgotten: %v", again)
	}
}
