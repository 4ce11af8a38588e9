// Command sidecarload measures writ's sidecar out of process, the way a
// caller meets it: over TCP, N HTTP/1.1 keep-alive connections, against a
// bare httputil.ReverseProxy in front of the same agent in the same run. It
// has three roles, so that each runs in a process of its own (and can be
// pinned to a CPU of its own):
//
//	sidecarload upstream -listen 127.0.0.1:9101
//	    a fast A2A 1.0 agent: every SendMessage is answered with a completed
//	    task (a new id each time, so writ's store records distinct tasks)
//	sidecarload bare -listen 127.0.0.1:9102 -upstream http://127.0.0.1:9101
//	    httputil.ReverseProxy in front of it, with a transport like writ's
//	sidecarload load -url http://127.0.0.1:9102 -request bench/request_allow.json -c 32 -duration 5s
//	    the load: prints one JSON summary (requests/s, p50, p99, errors)
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: sidecarload upstream|bare|load [flags]"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:9101", "upstream, bare: the address to serve on")
	up := fs.String("upstream", "http://127.0.0.1:9101", "bare: the agent's URL")
	target := fs.String("url", "", "load: the proxy's URL")
	request := fs.String("request", "bench/request_allow.json", "load: the request, as an ext_authz CheckRequest (JSON)")
	conns := fs.Int("c", 32, "load: connections, one request at a time on each")
	duration := fs.Duration("duration", 5*time.Second, "load: how long to send")
	tokens := fs.String("tokens", "", "load: a file of bearer tokens, one per line; each request carries the next one "+
		"(another person's token on every request) instead of the request file's")
	keepPush := fs.Bool("keep-push", false, "load: keep the request's push config (its callback host does not exist here: "+
		"writ would retry every notification against it, and the run would measure that retry queue, not the sends)")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "upstream":
		err = (&http.Server{Addr: *listen, Handler: agent(), ReadHeaderTimeout: 5 * time.Second}).ListenAndServe()
	case "bare":
		err = bare(*listen, *up)
	case "load":
		var res Result
		if res, err = Load(*target, *request, *tokens, *conns, *duration, *keepPush); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(res)
		}
	default:
		err = fmt.Errorf("unknown role %q", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sidecarload:", err)
	os.Exit(1)
}

// agent answers like bench/sidecar_test.go's upstream: a completed task with
// one artifact, a new id per answer.
func agent() http.Handler {
	var n atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := fmt.Sprintf("task-%012d", n.Add(1))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"req-7f3a","result":{"task":{"id":"%s","contextId":"ctx-wholesale-981",`+
			`"status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-11-30T06:26:40.218Z"},`+
			`"artifacts":[{"artifactId":"a-%s","name":"sanctions-screening","parts":[{"text":"No sanctions matches."}]}]}}}`, id, id)
	})
}

func bare(listen, up string) error {
	u, err := url.Parse(up)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(u) //nolint:gosec // the benchmark's own agent, named on the command line
	rp.Transport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	return (&http.Server{Addr: listen, Handler: rp, ReadHeaderTimeout: 5 * time.Second}).ListenAndServe()
}

// Result is one load run's summary.
type Result struct {
	Count  int     `json:"count"`
	Errors int     `json:"errors"`
	RPS    float64 `json:"rps"`
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	// FirstError is the first failure seen (a status other than 200, or a
	// transport error), for the report's log.
	FirstError string `json:"first_error,omitempty"`
}

// template is the HTTP request of an ext_authz CheckRequest file.
type template struct {
	method, path, host string
	header             http.Header
	body               []byte
	// tokens, when set, replace the request's bearer token in turn.
	tokens []string
	next   *atomic.Uint64
}

func readTemplate(file string) (template, error) {
	raw, err := os.ReadFile(file) //nolint:gosec // the request file named on the command line
	if err != nil {
		return template{}, err
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		return template{}, fmt.Errorf("%s: %w", file, err)
	}
	h := cr.GetAttributes().GetRequest().GetHttp()
	t := template{method: h.GetMethod(), path: h.GetPath(), host: h.GetHost(), header: http.Header{}, body: []byte(h.GetBody())}
	for k, v := range h.GetHeaders() {
		if !strings.HasPrefix(k, ":") && k != "content-length" {
			t.header.Set(k, v)
		}
	}
	return t, nil
}

// Load sends the request on conns connections for d, each one request at a
// time, and summarises the answers. With a tokens file, request i carries
// token i (round robin) as its bearer credential.
func Load(target, file, tokens string, conns int, d time.Duration, keepPush bool) (Result, error) {
	t, err := readTemplate(file)
	if err != nil {
		return Result{}, err
	}
	if tokens != "" {
		raw, err := os.ReadFile(tokens) //nolint:gosec // the token file named on the command line
		if err != nil {
			return Result{}, err
		}
		if t.tokens = strings.Fields(string(raw)); len(t.tokens) == 0 {
			return Result{}, fmt.Errorf("%s: no tokens", tokens)
		}
		t.next = new(atomic.Uint64)
	}
	if !keepPush {
		if t.body, err = withoutPush(t.body); err != nil {
			return Result{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		firstErr string
		wg       sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(d)
	for range conns {
		wg.Go(func() {
			mine := make([]time.Duration, 0, 4096)
			bad := 0
			first := ""
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := t.do(client, target); err != nil {
					bad++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			if firstErr == "" {
				firstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	res := Result{Count: len(lat), Errors: errs, RPS: float64(len(lat)) / elapsed.Seconds(), FirstError: firstErr}
	if n := len(lat); n > 0 {
		res.P50us = float64(lat[n/2].Microseconds())
		res.P99us = float64(lat[min(n-1, n*99/100)].Microseconds())
	}
	return res, nil
}

// withoutPush removes params.configuration.taskPushNotificationConfig.
func withoutPush(body []byte) ([]byte, error) {
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	if params, ok := req["params"].(map[string]any); ok {
		if conf, ok := params["configuration"].(map[string]any); ok {
			delete(conf, "taskPushNotificationConfig")
		}
	}
	return json.Marshal(req)
}

func (t template) do(client *http.Client, base string) error {
	req, err := http.NewRequest(t.method, base+t.path, bytes.NewReader(t.body)) //nolint:gosec // the proxy under test, named on the command line
	if err != nil {
		return err
	}
	req.Header = t.header.Clone()
	if t.next != nil {
		req.Header.Set("Authorization", "Bearer "+t.tokens[(t.next.Add(1)-1)%uint64(len(t.tokens))])
	}
	req.Host = t.host
	resp, err := client.Do(req) //nolint:gosec // as above
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}
