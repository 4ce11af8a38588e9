package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/server"
	"github.com/writ-authz/writ/task"
)

// upstream is a fast A2A 1.0 agent: it answers every SendMessage with a
// completed task (a new id each time, so writ's lifecycle store sees distinct
// tasks) and every SendStreamingMessage with four SSE events.
func upstream(tb testing.TB) *httptest.Server {
	var n atomic.Uint64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := fmt.Sprintf("task-%012d", n.Add(1))
		status := func(state string) string {
			return `{"state":"` + state + `","timestamp":"2026-11-30T06:26:40.218Z"}`
		}
		task := `{"id":"` + id + `","contextId":"ctx-wholesale-981","status":` + status("TASK_STATE_COMPLETED") +
			`,"artifacts":[{"artifactId":"a-` + id + `","name":"sanctions-screening","parts":[{"text":"No sanctions matches."}]}]}`
		if bytes.Contains(body, []byte(`"SendStreamingMessage"`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			submitted := `{"id":"` + id + `","contextId":"ctx-wholesale-981","status":` + status("TASK_STATE_SUBMITTED") + `}`
			for _, ev := range []string{`{"task":` + submitted + `}`,
				`{"statusUpdate":{"taskId":"` + id + `","contextId":"ctx-wholesale-981","status":` + status("TASK_STATE_WORKING") + `}}`,
				`{"artifactUpdate":{"taskId":"` + id + `","contextId":"ctx-wholesale-981","artifact":{"artifactId":"a-` + id + `","parts":[{"text":"No sanctions matches."}]},"lastChunk":true}}`,
				`{"statusUpdate":{"taskId":"` + id + `","contextId":"ctx-wholesale-981","status":` + status("TASK_STATE_COMPLETED") + `}}`,
			} {
				fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"req-7f3a\",\"result\":%s}\n\n", ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"req-7f3a","result":{"task":%s}}`, task)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// startWrit builds writ as writ serve does (server.New): the shipped
// policy, the bench token's issuer, the bench request's agent in front of
// up, and the envoy: section given (YAML, may be empty); the decision log
// off, a memory store sized for the run. With a notifier, writ keeps push
// configs itself (as writ serve does by default); without, push is left to
// the agents.
func startWrit(tb testing.TB, up string, cacheSize int, envoy string, n proxy.Notifier) *server.Server {
	tb.Helper()
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:0
decision_log: {output: 'off'}
policies: [../policies]
decision_cache_size: %d
limits: {upstream_timeout: 5s, stream_idle_timeout: 5s}
push: {disabled: %t}
identity:
  jwt: [{issuer: "https://idp.bank.ae", audiences: [a2a-gateway], jwks_file: ../testdata/identity/bench_jwks.json}]
agents:
  - name: sanctions-screening-agent
    route: /
    upstream: %s
    public_url: https://sanctions-screening-agent.agents.bank.ae
    owner: group-compliance
    tenants: [wholesale, retail]
    max_data_classification: restricted
    security_schemes: [oauth2]
    skills: [{id: screen, tags: [sanctions, compliance, screening]}]
%s`, cacheSize, n == nil, up, envoy)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	opts := []server.Option{server.WithLogger(slog.New(slog.DiscardHandler)), server.WithoutPolicyTests(),
		server.WithStore(task.NewMemoryStore(task.MemoryLimits{MaxTasks: 20000, MaxPerOwner: 20000, TTL: time.Hour}))}
	if n != nil {
		opts = append(opts, server.WithNotifier(n))
	}
	s, err := server.New(context.Background(), cfg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("writ's shutdown: %v", err)
		}
	})
	return s
}

// sidecar is the base URL of writ's sidecar in front of up.
func sidecar(tb testing.TB, up string, cacheSize int) string {
	tb.Helper()
	return startWrit(tb, up, cacheSize, "", nil).URL()
}

// bareProxy is httputil.ReverseProxy in front of up, with a transport like writ's.
func bareProxy(tb testing.TB, up string) *httptest.Server {
	u, _ := url.Parse(up)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	rp.ErrorLog = nil
	srv := httptest.NewServer(rp)
	tb.Cleanup(srv.Close)
	return srv
}

// checkRequest reads a bench/request_*.json CheckRequest as an HTTP request
// template: method, path, headers and body.
type reqTemplate struct {
	method, path string
	header       http.Header
	body         []byte
}

func readTemplate(tb testing.TB, file string, stream, deny bool) reqTemplate {
	raw, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		tb.Fatal(err)
	}
	h := cr.GetAttributes().GetRequest().GetHttp()
	t := reqTemplate{method: h.GetMethod(), path: h.GetPath(), header: http.Header{}, body: []byte(h.GetBody())}
	for k, v := range h.GetHeaders() {
		if !strings.HasPrefix(k, ":") {
			t.header.Set(k, v)
		}
	}
	t.header.Del("Content-Length")
	if deny {
		// A callback host no allow-list names: CALLBACK_NOT_ALLOWED (403).
		t.body = bytes.Replace(t.body, []byte(`https://agents.bank.ae/cb`), []byte(`https://evil.example/cb`), 1)
	}
	if stream {
		t.body = bytes.Replace(t.body, []byte(`"method":"SendMessage"`), []byte(`"method":"SendStreamingMessage"`), 1)
		t.header.Set("Accept", "text/event-stream")
	}
	return t
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}}

// do sends one request and reads the whole answer; it reports the status.
func (t reqTemplate) do(base string) (int, error) {
	req, err := http.NewRequest(t.method, base+t.path, bytes.NewReader(t.body))
	if err != nil {
		return 0, err
	}
	req.Header = t.header.Clone()
	req.Host = "sanctions-screening-agent.agents.bank.ae"
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// BenchmarkSidecar compares the sidecar with a bare httputil.ReverseProxy in
// front of the same upstream: parallel (16 concurrent clients per P; ns/op is
// the inverse of throughput) and serial (ns/op is one round trip).
func BenchmarkSidecar(b *testing.B) {
	up := upstream(b)
	bare := bareProxy(b, up.URL)
	hit := sidecar(b, up.URL, 10000)
	miss := sidecar(b, up.URL, -1)
	allow := readTemplate(b, "request_allow.json", false, false)
	stream := readTemplate(b, "request_allow.json", true, false)
	deny := readTemplate(b, "request_allow.json", false, true)
	cases := []struct {
		name string
		base string
		req  reqTemplate
		want int
	}{
		{"bare-proxy", bare.URL, allow, 200},
		{"allow-hit", hit, allow, 200},
		{"allow-miss", miss, allow, 200},
		{"deny", hit, deny, 403},
		{"bare-proxy-stream", bare.URL, stream, 200},
		{"stream", hit, stream, 200},
	}
	for _, c := range cases {
		if code, err := c.req.do(c.base); err != nil || code != c.want {
			b.Fatalf("%s: status %d (want %d), %v", c.name, code, c.want, err)
		}
	}
	for _, mode := range []string{"parallel", "serial"} {
		for _, c := range cases {
			b.Run(mode+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				if mode == "serial" {
					for b.Loop() {
						if code, err := c.req.do(c.base); err != nil || code != c.want {
							b.Fatalf("status %d, %v", code, err)
						}
					}
					return
				}
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if code, err := c.req.do(c.base); err != nil || code != c.want {
							b.Errorf("status %d, %v", code, err)
							return
						}
					}
				})
			})
		}
	}
}
