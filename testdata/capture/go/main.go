// Command capture records real A2A 0.3 JSON-RPC traffic between the a2a-go
// v0.3.3 client (a2aclient) and server (a2asrv.NewJSONRPCHandler) and writes
// one HTTP/1.1 message per file under testdata/a2a/v0.3/.
//
//	go run . <out-dir>     (default: ../../a2a)
//
// Recording happens on the client's TCP connection (a net.Conn wrapper
// installed through http.Transport.DialContext), so the files hold the exact
// bytes written and read. The card advertises http://agent.test/ and the
// dialer sends every connection to the local server, so the Host header and
// the card body are stable across runs. Responses are normalised as the
// fixture format requires: Date and Transfer-Encoding dropped, chunked bodies
// de-chunked, Content-Length set.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
)

const (
	host        = "agent.test"
	base        = "http://" + host
	extURI      = "urn:writ:ext:classification:v1"
	unknownTask = "00000000-0000-4000-8000-000000000000"
)

// ---------------------------------------------------------------- executor

type executor struct{}

func textMsg(info a2a.TaskInfoProvider, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.TextPart{Text: text})
}

func firstText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b []string
	for _, p := range m.Parts {
		if t, ok := p.(a2a.TextPart); ok {
			b = append(b, t.Text)
		}
	}
	return strings.Join(b, " ")
}

func beneficiary(m *a2a.Message) string {
	if m != nil {
		for _, p := range m.Parts {
			if d, ok := p.(a2a.DataPart); ok {
				if s, ok := d.Data["beneficiary"].(string); ok {
					return s
				}
			}
		}
	}
	return "Acme Trading FZE"
}

func status(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, st a2a.TaskState, msg *a2a.Message, final bool) error {
	ev := a2a.NewStatusUpdateEvent(rc, st, msg)
	ev.Final = final
	return q.Write(ctx, ev)
}

func artifact(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, subject string) error {
	ev := a2a.NewArtifactEvent(rc,
		a2a.TextPart{Text: fmt.Sprintf("No sanctions matches for %s.", subject)},
		a2a.DataPart{Data: map[string]any{"beneficiary": subject, "matches": 0, "lists": []any{"OFAC-SDN", "UN", "EU"}}},
	)
	ev.Artifact.ID = a2a.ArtifactID("sanctions-" + string(rc.TaskID))
	ev.Artifact.Name = "sanctions-screening"
	ev.Artifact.Description = "Sanctions screening result"
	ev.LastChunk = true
	return q.Write(ctx, ev)
}

// Execute: "Screen..." -> working, artifact sanctions-screening, completed;
// "Clarify..."/"Park..." -> input-required; a follow-up on an input-required
// task completes it; text containing "slowly" waits before completing.
func (executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	text := firstText(rc.Message)
	subject := beneficiary(rc.Message)
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	if rc.StoredTask != nil && rc.StoredTask.Status.State == a2a.TaskStateInputRequired {
		if err := status(ctx, q, rc, a2a.TaskStateWorking, nil, false); err != nil {
			return err
		}
		if err := artifact(ctx, q, rc, subject); err != nil {
			return err
		}
		return status(ctx, q, rc, a2a.TaskStateCompleted,
			textMsg(rc, fmt.Sprintf("Screened %s against %s: no matches.", subject, strings.TrimSpace(text))), true)
	}
	if strings.HasPrefix(text, "Clarify") || strings.HasPrefix(text, "Park") {
		return status(ctx, q, rc, a2a.TaskStateInputRequired, textMsg(rc, "Which jurisdiction should I screen against?"), true)
	}
	if err := status(ctx, q, rc, a2a.TaskStateWorking, nil, false); err != nil {
		return err
	}
	if strings.Contains(text, "slowly") {
		select {
		case <-time.After(700 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := artifact(ctx, q, rc, subject); err != nil {
		return err
	}
	return status(ctx, q, rc, a2a.TaskStateCompleted, textMsg(rc, "Screening complete."), true)
}

func (executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return status(ctx, q, rc, a2a.TaskStateCanceled, textMsg(rc, "Canceled by request."), true)
}

// noopSender keeps the server from trying to reach agents.bank.ae.
type noopSender struct{}

func (noopSender) SendPush(context.Context, *a2a.PushConfig, *a2a.Task) error { return nil }

// ---------------------------------------------------------------- cards

func makeCard() *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:               "Sanctions Screening Agent",
		Description:        "Screens counterparties against sanctions lists (Writ capture fixture agent).",
		URL:                base + "/",
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		Provider:           &a2a.AgentProvider{Org: "Writ Test Bank", URL: "https://bank.ae"},
		Capabilities: a2a.AgentCapabilities{
			Streaming:         true,
			PushNotifications: true,
			Extensions: []a2a.AgentExtension{{
				URI: extURI, Description: "Data classification label carried in message metadata",
			}},
		},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT", Description: "Bank-issued JWT"},
		},
		Security:                          []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}},
		DefaultInputModes:                 []string{"text/plain", "application/json", "application/pdf"},
		DefaultOutputModes:                []string{"text/plain", "application/json"},
		SupportsAuthenticatedExtendedCard: true,
		Skills: []a2a.AgentSkill{{
			ID: "sanctions-screening", Name: "Sanctions screening",
			Description: "Screen a beneficiary against OFAC, UN and EU lists.",
			Tags:        []string{"kyc", "sanctions"}, Examples: []string{"Screen Acme Trading FZE"},
		}},
	}
}

func extendedCard(c *a2a.AgentCard) *a2a.AgentCard {
	e := *c
	e.Description += " Extended card for authenticated callers."
	e.Skills = append(append([]a2a.AgentSkill{}, c.Skills...), a2a.AgentSkill{
		ID: "pep-screening", Name: "PEP screening", Description: "Screen for politically exposed persons.",
		Tags: []string{"kyc", "pep"},
	})
	return &e
}

// ---------------------------------------------------------------- recorder

type recorder struct {
	mu     sync.Mutex
	wr, rd bytes.Buffer
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wr.Reset()
	r.rd.Reset()
}

func (r *recorder) snapshot() ([]byte, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.wr.Bytes()), bytes.Clone(r.rd.Bytes())
}

type recConn struct {
	net.Conn
	r *recorder
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.r.mu.Lock()
		c.r.rd.Write(p[:n])
		c.r.mu.Unlock()
	}
	return n, err
}

func (c *recConn) Write(p []byte) (int, error) {
	c.r.mu.Lock()
	c.r.wr.Write(p)
	c.r.mu.Unlock()
	return c.Conn.Write(p)
}

// complete reports whether raw holds one whole HTTP response.
func complete(raw []byte, method string) bool {
	req := &http.Request{Method: method}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), req)
	if err != nil {
		return false
	}
	_, err = io.ReadAll(resp.Body)
	return err == nil
}

func splitHead(raw []byte) (head []string, body []byte, err error) {
	i := bytes.Index(raw, []byte("\r\n\r\n"))
	if i < 0 {
		return nil, nil, errors.New("no end of head")
	}
	return strings.Split(string(raw[:i]), "\r\n"), raw[i+4:], nil
}

func normalise(head []string, body []byte, isResponse bool) ([]byte, error) {
	var out []string
	chunked, hadLen := false, false
	for i, line := range head {
		if i == 0 {
			out = append(out, line)
			continue
		}
		k, _, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "date":
			continue
		case "transfer-encoding":
			chunked = strings.Contains(strings.ToLower(line), "chunked")
			continue
		case "content-length":
			hadLen = true
		}
		out = append(out, line)
	}
	if chunked {
		b, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(body)))
		if err != nil {
			return nil, fmt.Errorf("dechunk: %w", err)
		}
		body = b
	}
	if isResponse && !hadLen && (chunked || len(body) > 0) {
		out = append(out, "Content-Length: "+strconv.Itoa(len(body)))
	}
	for i, line := range out {
		if strings.HasPrefix(strings.ToLower(line), "content-length:") {
			out[i] = line[:len("Content-Length")] + ": " + strconv.Itoa(len(body))
		}
	}
	return append([]byte(strings.Join(out, "\r\n")+"\r\n\r\n"), body...), nil
}

type session struct {
	rec *recorder
	out string
	n   int
}

// capture runs fn, which must cause exactly one HTTP exchange, and writes it.
func (s *session) capture(dir, name string, expectErr bool, fn func() error) error {
	s.rec.reset()
	callErr := fn()
	var wr, rd []byte
	method := ""
	deadline := time.Now().Add(5 * time.Second)
	for {
		wr, rd = s.rec.snapshot()
		if sp := bytes.IndexByte(wr, ' '); sp > 0 {
			method = string(wr[:sp])
		}
		if method != "" && complete(rd, method) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/%s: response incomplete (%d bytes read, call error %v)", dir, name, len(rd), callErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if callErr != nil && !expectErr {
		return fmt.Errorf("%s/%s: %w", dir, name, callErr)
	}
	// One request only.
	if rq, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(wr))); err != nil {
		return fmt.Errorf("%s/%s: bad request bytes: %w", dir, name, err)
	} else {
		b, _ := io.ReadAll(rq.Body)
		hl := bytes.Index(wr, []byte("\r\n\r\n")) + 4
		if hl+len(b) != len(wr) {
			return fmt.Errorf("%s/%s: expected exactly one request, got %d extra bytes", dir, name, len(wr)-hl-len(b))
		}
	}
	qh, qb, err := splitHead(wr)
	if err != nil {
		return err
	}
	reqOut, err := normalise(qh, qb, false)
	if err != nil {
		return err
	}
	rh, rb, err := splitHead(rd)
	if err != nil {
		return err
	}
	respOut, err := normalise(rh, rb, true)
	if err != nil {
		return err
	}
	full := filepath.Join(s.out, dir)
	if err := os.MkdirAll(full, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(full, name+".request.http"), reqOut, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(full, name+".response.http"), respOut, 0o644); err != nil {
		return err
	}
	if bytes.Contains(reqOut, []byte("127.0.0.1")) || bytes.Contains(respOut, []byte("127.0.0.1")) {
		return fmt.Errorf("%s/%s: loopback address leaked into fixture", dir, name)
	}
	s.n++
	note := ""
	if callErr != nil {
		note = fmt.Sprintf(" (client error: %v)", callErr)
	}
	fmt.Printf("[go] %s/%s: %s -> %s%s\n", dir, name, qh[0], rh[0], note)
	return nil
}

// ---------------------------------------------------------------- driver

type extKey struct{}

// extInterceptor adds X-A2A-Extensions to calls whose context asks for it.
type extInterceptor struct{}

func (extInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	if ctx.Value(extKey{}) != nil {
		req.Meta[a2asrv.ExtensionsMetaKey] = []string{extURI}
	}
	return ctx, nil
}
func (extInterceptor) After(context.Context, *a2aclient.Response) error { return nil }

func taskOf(r a2a.SendMessageResult) (*a2a.Task, error) {
	t, ok := r.(*a2a.Task)
	if !ok {
		return nil, fmt.Errorf("expected a task, got %T", r)
	}
	return t, nil
}

func screenMsg(id string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser,
		a2a.TextPart{Text: "Screen this beneficiary against sanctions lists."},
		a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})
	m.ID = id
	m.Metadata = map[string]any{extURI: map[string]any{"level": "restricted"}}
	return m
}

func userMsg(id string, parts ...a2a.Part) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	m.ID = id
	return m
}

func cfg() *a2a.MessageSendConfig {
	return &a2a.MessageSendConfig{AcceptedOutputModes: []string{"text/plain", "application/json"}}
}

func pushCfg(id string) a2a.PushConfig {
	return a2a.PushConfig{
		ID: id, URL: "https://agents.bank.ae/cb", Token: "s3cret",
		Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "eyJhbGciOiJIUzI1NiJ9.e30.cGxhY2Vob2xkZXI"},
	}
}

func run(out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	card := makeCard()
	handler := a2asrv.NewHandler(executor{},
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), noopSender{}),
		a2asrv.WithExtendedAgentCard(extendedCard(card)),
	)
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/", a2asrv.NewJSONRPCHandler(handler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	addr := ln.Addr().String()

	rec := &recorder{}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	httpClient := &http.Client{
		Timeout: 20 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				c, err := dialer.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &recConn{Conn: c, r: rec}, nil
			},
		},
	}
	s := &session{rec: rec, out: out}
	const dir = "v0.3/jsonrpc"

	// card
	var resolved *a2a.AgentCard
	if err := s.capture("v0.3", "card", false, func() error {
		var err error
		resolved, err = agentcard.NewResolver(httpClient).Resolve(ctx, base)
		return err
	}); err != nil {
		return err
	}
	client, err := a2aclient.NewFromCard(ctx, resolved,
		a2aclient.WithJSONRPCTransport(httpClient),
		a2aclient.WithInterceptors(extInterceptor{}))
	if err != nil {
		return err
	}
	extCtx := context.WithValue(ctx, extKey{}, true)

	// send
	var sent *a2a.Task
	if err := s.capture(dir, "send", false, func() error {
		r, err := client.SendMessage(extCtx, &a2a.MessageSendParams{Message: screenMsg("msg-jsonrpc-send"), Config: cfg()})
		if err != nil {
			return err
		}
		sent, err = taskOf(r)
		return err
	}); err != nil {
		return err
	}
	// send_file
	if err := s.capture(dir, "send_file", false, func() error {
		_, err := client.SendMessage(ctx, &a2a.MessageSendParams{Config: cfg(), Message: userMsg("msg-jsonrpc-file",
			a2a.TextPart{Text: "Screen the holder of this passport."},
			a2a.FilePart{File: a2a.FileURI{URI: "https://files.bank.ae/kyc/passport.pdf",
				FileMeta: a2a.FileMeta{MimeType: "application/pdf", Name: "passport.pdf"}}})})
		return err
	}); err != nil {
		return err
	}
	// send_push
	if err := s.capture(dir, "send_push", true, func() error {
		c := cfg()
		pc := pushCfg("cb-1")
		c.PushConfig = &pc
		_, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: screenMsg("msg-jsonrpc-push"), Config: c})
		return err
	}); err != nil {
		return err
	}
	// send_input_required + send_reply
	var ir *a2a.Task
	if err := s.capture(dir, "send_input_required", false, func() error {
		r, err := client.SendMessage(ctx, &a2a.MessageSendParams{Config: cfg(), Message: userMsg("msg-jsonrpc-clarify",
			a2a.TextPart{Text: "Clarify and screen this beneficiary."},
			a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})})
		if err != nil {
			return err
		}
		ir, err = taskOf(r)
		return err
	}); err != nil {
		return err
	}
	if err := s.capture(dir, "send_reply", false, func() error {
		m := userMsg("msg-jsonrpc-reply", a2a.TextPart{Text: "UAE and UN lists"})
		m.TaskID, m.ContextID = ir.ID, ir.ContextID
		_, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: m, Config: cfg()})
		return err
	}); err != nil {
		return err
	}
	// stream
	if err := s.capture(dir, "stream", false, func() error {
		for _, err := range client.SendStreamingMessage(extCtx, &a2a.MessageSendParams{Message: screenMsg("msg-jsonrpc-stream"), Config: cfg()}) {
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	// get
	if err := s.capture(dir, "get", false, func() error {
		_, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: sent.ID})
		return err
	}); err != nil {
		return err
	}
	// cancel: a task parked in input-required
	r, err := client.SendMessage(ctx, &a2a.MessageSendParams{Config: cfg(), Message: userMsg("msg-jsonrpc-park",
		a2a.TextPart{Text: "Park this screening until told."})})
	if err != nil {
		return err
	}
	parked, err := taskOf(r)
	if err != nil {
		return err
	}
	if err := s.capture(dir, "cancel", false, func() error {
		_, err := client.CancelTask(ctx, &a2a.TaskIDParams{ID: parked.ID})
		return err
	}); err != nil {
		return err
	}
	// cancel_again: cancel the now-canceled task a second time (a2a-go answers
	// with the task, not an error); cancel_terminal: cancel the completed task.
	if err := s.capture(dir, "cancel_again", true, func() error {
		_, err := client.CancelTask(ctx, &a2a.TaskIDParams{ID: parked.ID})
		return err
	}); err != nil {
		return err
	}
	if err := s.capture(dir, "cancel_terminal", true, func() error {
		_, err := client.CancelTask(ctx, &a2a.TaskIDParams{ID: sent.ID})
		return err
	}); err != nil {
		return err
	}
	// get_unknown
	if err := s.capture(dir, "get_unknown", true, func() error {
		_, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: unknownTask})
		return err
	}); err != nil {
		return err
	}
	// subscribe: non-blocking send of a slow task, then tasks/resubscribe
	blocking := false
	c := cfg()
	c.Blocking = &blocking
	r, err = client.SendMessage(ctx, &a2a.MessageSendParams{Config: c, Message: userMsg("msg-jsonrpc-slow",
		a2a.TextPart{Text: "Screen this beneficiary slowly and thoroughly."},
		a2a.DataPart{Data: map[string]any{"beneficiary": "Acme Trading FZE"}})})
	if err != nil {
		return err
	}
	slow, err := taskOf(r)
	if err != nil {
		return err
	}
	if err := s.capture(dir, "subscribe", false, func() error {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		for _, err := range client.ResubscribeToTask(sctx, &a2a.TaskIDParams{ID: slow.ID}) {
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	// push config operations
	if err := s.capture(dir, "push_set", false, func() error {
		_, err := client.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: sent.ID, Config: pushCfg("cfg-1")})
		return err
	}); err != nil {
		return err
	}
	if err := s.capture(dir, "push_get", false, func() error {
		_, err := client.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: sent.ID, ConfigID: "cfg-1"})
		return err
	}); err != nil {
		return err
	}
	if err := s.capture(dir, "push_list", false, func() error {
		_, err := client.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: sent.ID})
		return err
	}); err != nil {
		return err
	}
	if err := s.capture(dir, "push_delete", true, func() error {
		return client.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: sent.ID, ConfigID: "cfg-1"})
	}); err != nil {
		return err
	}
	// card_extended
	if err := s.capture(dir, "card_extended", true, func() error {
		_, err := client.GetAgentCard(ctx)
		return err
	}); err != nil {
		return err
	}
	// raw JSON-RPC errors (the client has no call for these)
	raw := func(body string) func() error {
		return func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/", strings.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := httpClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			return err
		}
	}
	if err := s.capture(dir, "error_parse", false, raw(`{"jsonrpc":"2.0","method":`)); err != nil {
		return err
	}
	if err := s.capture(dir, "error_method", false,
		raw(`{"jsonrpc":"2.0","id":"frob-1","method":"tasks/frobnicate","params":{"id":"`+string(sent.ID)+`"}}`)); err != nil {
		return err
	}
	fmt.Printf("[go] wrote %d exchanges under %s\n", s.n, out)
	return nil
}

// check verifies that every fixture under dir is one complete HTTP/1.1
// message readable by http.ReadRequest / http.ReadResponse, with nothing left
// over after the body.
func check(dir string) error {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".http") {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		br := bufio.NewReader(bytes.NewReader(raw))
		var body io.ReadCloser
		switch {
		case strings.HasSuffix(p, ".request.http"):
			req, err := http.ReadRequest(br)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			body = req.Body
		case strings.HasSuffix(p, ".response.http"):
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if len(resp.TransferEncoding) > 0 {
				return fmt.Errorf("%s: Transfer-Encoding left in place", p)
			}
			body = resp.Body
		default:
			return fmt.Errorf("%s: unexpected fixture name", p)
		}
		if _, err := io.ReadAll(body); err != nil {
			return fmt.Errorf("%s: body: %w", p, err)
		}
		if rest, _ := io.ReadAll(br); len(rest) > 0 {
			return fmt.Errorf("%s: %d bytes after the message", p, len(rest))
		}
		n++
		return nil
	})
	if err == nil {
		fmt.Printf("[go] check: %d fixture files parse as HTTP/1.1 messages\n", n)
	}
	return err
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-check" {
		if err := check(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "check failed:", err)
			os.Exit(1)
		}
		return
	}
	out := filepath.Join("..", "..", "a2a")
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	done := make(chan error, 1)
	go func() { done <- run(out) }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "capture failed:", err)
			os.Exit(1)
		}
	case <-time.After(90 * time.Second):
		fmt.Fprintln(os.Stderr, "capture: global timeout")
		os.Exit(3)
	}
}
