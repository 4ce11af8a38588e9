package seedagents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"google.golang.org/grpc"
)

// CallerHeader is the header writ uses to tell an upstream who the caller is.
// Agents record it in Observed.Caller so tests can check what reached them
// (for example that a value forged by the client was stripped).
const CallerHeader = "Writ-Caller"

const (
	maxObserved     = 1000     // requests remembered per agent
	maxObservedBody = 64 << 10 // bytes of each body remembered
	maxRequestBody  = 4 << 20  // larger JSON-RPC bodies are refused
	defaultSlow     = 30 * time.Second
	defaultACPDelay = 10 * time.Millisecond
)

// Observed is one HTTP request as an agent received it.
type Observed struct {
	// Method is the JSON-RPC method ("message/send", "tasks/cancel", ...) for
	// A2A calls, and the route ("GET /.well-known/agent-card.json",
	// "POST /runs", "GET /runs/{run_id}", ...) for everything else.
	Method string `json:"method"`
	// Path is the request path as received.
	Path string `json:"path"`
	// Header holds every request header as received.
	Header http.Header `json:"header"`
	// Caller is the value of the Writ-Caller header, "" when absent.
	Caller string `json:"caller,omitempty"`
	// CallerAgentID is Writ-Caller's agent_id as the agent's own JSON reader
	// parsed the header (the JS agent only), "" when it did not.
	CallerAgentID string `json:"callerAgentId,omitempty"`
	// TaskID is the A2A task (or ACP run) the request named or, for a new
	// task, the one the agent created.
	TaskID string `json:"taskId,omitempty"`
	// Tenant is the tenant the agent's SDK handed its request handler (the JS
	// agent: params.tenant, else the call context's); "" when none, and for
	// the Go agents, whose protocol (A2A 0.3) has no tenants.
	Tenant string `json:"tenant,omitempty"`
	// Body is the request body, cut at 64 KiB.
	Body string `json:"body,omitempty"`
}

func (o Observed) clone() Observed {
	o.Header = o.Header.Clone()
	return o
}

// Agent is a running seed agent bound to 127.0.0.1.
type Agent struct {
	// Name is the agent's name (on its card, or its ACP manifest).
	Name string
	// URL is the base URL, http://127.0.0.1:port, with no trailing slash.
	URL string
	// Card is the A2A 0.3 card the agent serves; nil for the ACP agent.
	Card *a2a.AgentCard

	srv  *http.Server
	grpc *grpc.Server
	stop context.CancelFunc

	mu   sync.Mutex
	seen []*Observed

	closeOnce sync.Once
	closeErr  error
}

// Option configures a seed agent.
type Option func(*config)

type config struct {
	name    string
	cardURL string
	push    bool
	delay   time.Duration
	logger  *slog.Logger
	onState func(a2a.TaskID, a2a.TaskState)
	grpc    bool
}

// WithName overrides the agent's name.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithCardURL sets the URL the agent card advertises (by default the agent's
// own JSON-RPC endpoint, URL + "/"); point it at writ to put writ in front.
func WithCardURL(url string) Option { return func(c *config) { c.cardURL = url } }

// WithPushNotifications turns on push notification support (off by default):
// the card advertises it and configs are stored and delivered over HTTP.
func WithPushNotifications(on bool) Option { return func(c *config) { c.push = on } }

// WithDelay sets how long the slow agent works before completing on its own
// (default 30s), and how long an ACP run works (default 10ms).
func WithDelay(d time.Duration) Option { return func(c *config) { c.delay = d } }

// WithStateHook calls f each time an A2A agent stores a task in a state the
// task was not in before (the SDK saves the task after every event), so a
// caller can wait for a state instead of polling tasks/get. f runs on the
// agent's event-processing goroutine and must not block.
func WithStateHook(f func(id a2a.TaskID, state a2a.TaskState)) Option {
	return func(c *config) { c.onState = f }
}

// WithGRPC serves the A2A agent over gRPC (a2a-go's a2agrpc, h2c on its
// URL's address) instead of JSON-RPC; it then serves no card over HTTP.
func WithGRPC() Option { return func(c *config) { c.grpc = true } }

// WithLogger sets the logger of the agent's SDK handler (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

func newConfig(name string, delay time.Duration, opts []Option) *config {
	c := &config{name: name, delay: delay}
	for _, o := range opts {
		o(c)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// listen binds 127.0.0.1:0 and returns the listener and its base URL.
func listen() (net.Listener, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("seedagents: listen: %w", err)
	}
	return ln, "http://" + ln.Addr().String(), nil
}

// serve starts the HTTP server on ln.
func (a *Agent) serve(ln net.Listener, h http.Handler) {
	a.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
}

// Close stops the agent: running work is cancelled and every connection,
// open streams included, is closed. It is safe to call more than once.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		if a.stop != nil {
			a.stop()
		}
		if a.srv != nil {
			a.closeErr = a.srv.Close()
		}
		if a.grpc != nil {
			a.grpc.Stop()
		}
	})
	return a.closeErr
}

// Requests returns what the agent has received so far (the last 1000
// requests), oldest first.
func (a *Agent) Requests() []Observed {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Observed, len(a.seen))
	for i, o := range a.seen {
		out[i] = o.clone()
	}
	return out
}

// record remembers o, dropping the oldest entry beyond maxObserved.
func (a *Agent) record(o *Observed) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) >= maxObserved {
		copy(a.seen, a.seen[1:])
		a.seen = a.seen[:len(a.seen)-1]
	}
	a.seen = append(a.seen, o)
}

// setTaskID fills in o.TaskID if it is still empty.
func (a *Agent) setTaskID(o *Observed, id string) {
	if o == nil || id == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if o.TaskID == "" {
		o.TaskID = id
	}
}

type observedKey struct{}

// observedFrom returns the Observed entry of the request ctx belongs to.
func observedFrom(ctx context.Context) *Observed {
	o, _ := ctx.Value(observedKey{}).(*Observed)
	return o
}

// newObserved starts an Observed entry for r with the given method.
func newObserved(r *http.Request, method string) *Observed {
	return &Observed{
		Method: method,
		Path:   r.URL.Path,
		Header: r.Header.Clone(),
		Caller: r.Header.Get(CallerHeader),
	}
}

// readBody reads r's body (up to maxRequestBody), puts it back for the next
// handler and returns it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

func clip(b []byte) string {
	if len(b) > maxObservedBody {
		b = b[:maxObservedBody]
	}
	return string(b)
}

// rpcPeek pulls the method and the task id out of a JSON-RPC request body.
func rpcPeek(body []byte) (method, taskID string) {
	var req struct {
		Method string `json:"method"`
		Params struct {
			ID      string `json:"id"`
			TaskID  string `json:"taskId"`
			Message struct {
				TaskID string `json:"taskId"`
			} `json:"message"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &req) != nil {
		return "", ""
	}
	switch {
	case req.Params.Message.TaskID != "":
		taskID = req.Params.Message.TaskID
	case req.Params.TaskID != "":
		taskID = req.Params.TaskID
	default:
		taskID = req.Params.ID
	}
	return req.Method, taskID
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// isTooLarge reports whether err came from http.MaxBytesReader.
func isTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}
