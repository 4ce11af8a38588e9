package seedagents

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// ACPAgentName is the one agent the ACP server hosts.
const ACPAgentName = "kyc-refresh-agent"

const (
	acpDefaultCustomer = "Acme Trading FZE"
	maxRuns            = 1000 // runs kept; the oldest finished run is forgotten first
	cancelWait         = 2 * time.Second
)

// ACP wire shapes (i-am-bee/acp docs/spec/openapi.yaml 0.2.0).
type acpPart struct {
	Name            string         `json:"name,omitempty"`
	ContentType     string         `json:"content_type,omitempty"`
	Content         *string        `json:"content,omitempty"`
	ContentEncoding string         `json:"content_encoding,omitempty"`
	ContentURL      string         `json:"content_url,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
}

type acpMessage struct {
	Role        string     `json:"role"`
	Parts       []acpPart  `json:"parts"`
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

type acpError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

type acpRun struct {
	AgentName    string       `json:"agent_name"`
	SessionID    string       `json:"session_id"`
	RunID        string       `json:"run_id"`
	Status       string       `json:"status"`
	AwaitRequest any          `json:"await_request"`
	Output       []acpMessage `json:"output"`
	Error        *acpError    `json:"error"`
	CreatedAt    time.Time    `json:"created_at"`
	FinishedAt   *time.Time   `json:"finished_at,omitempty"`
}

type acpEvent struct {
	Type    string      `json:"type"`
	Run     *acpRun     `json:"run,omitempty"`
	Message *acpMessage `json:"message,omitempty"`
	Part    *acpPart    `json:"part,omitempty"`
}

var acpRole = regexp.MustCompile(`^(user|agent(/[a-zA-Z0-9_\-]+)?)$`)

func acpManifest() map[string]any {
	return map[string]any{
		"name":                 ACPAgentName,
		"description":          "Runs periodic KYC refresh workflows.",
		"input_content_types":  []string{"text/plain", "application/json"},
		"output_content_types": []string{"text/plain", "application/json"},
		"metadata": map[string]any{
			"documentation":     "Collect and verify refreshed KYC data.",
			"natural_languages": []string{"en"},
			"capabilities": []map[string]any{
				{"name": "Refresh KYC", "description": "Collect and verify refreshed KYC data."},
			},
			"domains": []string{"finance"},
			"tags":    []string{"kyc", "compliance"},
		},
	}
}

// run is one ACP run and its event log.
type run struct {
	r        acpRun
	customer string
	events   []acpEvent
	changed  chan struct{} // closed and replaced whenever events grows
	done     chan struct{} // closed when the run reaches a terminal status
	cancel   context.CancelFunc
}

func terminal(status string) bool {
	switch status {
	case "completed", "cancelled", "failed":
		return true
	}
	return false
}

type acpServer struct {
	a     *Agent
	delay time.Duration
	life  context.Context

	mu    sync.Mutex
	max   int
	runs  map[string]*run
	order []string
}

// StartACP starts an ACP server (REST, no SDK) hosting "kyc-refresh-agent":
// GET /agents, GET /agents/{name}, POST /runs (sync, async, stream),
// GET /runs/{run_id}, POST /runs/{run_id} (resume: always refused, the agent
// never awaits), POST /runs/{run_id}/cancel, GET /runs/{run_id}/events. A
// run works for the delay (WithDelay, default 10ms), then completes with a
// text part and a named JSON part "kyc-refresh". Cancelling a finished run
// answers 403 with an ACP Error, as the reference server does. Options other
// than WithDelay are ignored.
func StartACP(opts ...Option) (*Agent, error) {
	cfg := newConfig(ACPAgentName, defaultACPDelay, opts)
	ln, base, err := listen()
	if err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	a := &Agent{Name: ACPAgentName, URL: base, stop: stop}
	s := &acpServer{a: a, delay: cfg.delay, life: life, max: maxRuns, runs: make(map[string]*run)}
	a.serve(ln, s.routes())
	return a, nil
}

func (s *acpServer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents", s.listAgents)
	mux.HandleFunc("GET /agents/{name}", s.getAgent)
	mux.HandleFunc("POST /runs", s.createRun)
	mux.HandleFunc("GET /runs/{run_id}", s.getRun)
	mux.HandleFunc("POST /runs/{run_id}", s.resumeRun)
	mux.HandleFunc("POST /runs/{run_id}/cancel", s.cancelRun)
	mux.HandleFunc("GET /runs/{run_id}/events", s.runEvents)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		method := r.Method + " " + r.URL.Path
		if pattern != "" {
			method = pattern
		}
		o := newObserved(r, method)
		if rest, ok := strings.CutPrefix(r.URL.Path, "/runs/"); ok {
			o.TaskID, _, _ = strings.Cut(rest, "/")
		}
		if r.Method == http.MethodPost {
			body, err := readBody(w, r)
			if err != nil {
				s.a.record(o)
				acpFail(w, http.StatusBadRequest, "invalid_input", "cannot read request body")
				return
			}
			o.Body = clip(body)
		}
		s.a.record(o)
		if pattern == "" {
			acpFail(w, http.StatusNotFound, "not_found", "Not Found")
			return
		}
		mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), observedKey{}, o)))
	})
}

func acpFail(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, acpError{Code: code, Message: msg})
}

func (s *acpServer) listAgents(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"agents": []any{acpManifest()}})
}

func (s *acpServer) getAgent(w http.ResponseWriter, r *http.Request) {
	if name := r.PathValue("name"); name != ACPAgentName {
		acpFail(w, http.StatusNotFound, "not_found", fmt.Sprintf("Agent %s not found", name))
		return
	}
	writeJSON(w, http.StatusOK, acpManifest())
}

type runCreateRequest struct {
	AgentName *string `json:"agent_name"`
	SessionID string  `json:"session_id"`
	Session   *struct {
		ID string `json:"id"`
	} `json:"session"`
	Input []acpMessage `json:"input"`
	Mode  string       `json:"mode"`
}

func (s *acpServer) createRun(w http.ResponseWriter, r *http.Request) {
	var req runCreateRequest
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&req); err != nil {
		acpFail(w, http.StatusBadRequest, "invalid_input", "request body is not a RunCreateRequest: "+err.Error())
		return
	}
	if msg := validateRunCreate(&req); msg != "" {
		acpFail(w, http.StatusUnprocessableEntity, "invalid_input", msg)
		return
	}
	if *req.AgentName != ACPAgentName {
		acpFail(w, http.StatusNotFound, "not_found", fmt.Sprintf("Agent %s not found", *req.AgentName))
		return
	}
	session := req.SessionID
	if session == "" && req.Session != nil {
		session = req.Session.ID
	}
	if session == "" {
		session = newUUID()
	}
	rn, snapshot, ok := s.newRun(session, customerOf(req.Input))
	if !ok {
		acpFail(w, http.StatusServiceUnavailable, "server_error", "run limit reached")
		return
	}
	s.a.setTaskID(observedFrom(r.Context()), snapshot.RunID)
	w.Header().Set("Run-ID", snapshot.RunID)

	switch req.Mode {
	case "async":
		writeJSON(w, http.StatusAccepted, snapshot)
	case "stream":
		s.stream(w, r, rn, 0)
	default: // sync
		select {
		case <-rn.done:
		case <-r.Context().Done():
			return
		}
		writeJSON(w, http.StatusOK, s.snapshot(rn))
	}
}

func validateRunCreate(req *runCreateRequest) string {
	switch {
	case req.AgentName == nil || *req.AgentName == "":
		return "agent_name: field required"
	case req.Input == nil:
		return "input: field required"
	}
	switch req.Mode {
	case "", "sync", "async", "stream":
	default:
		return fmt.Sprintf("mode: %q is not one of sync, async, stream", req.Mode)
	}
	for i, m := range req.Input {
		if !acpRole.MatchString(m.Role) {
			return fmt.Sprintf("input[%d].role: %q does not match ^(user|agent(\\/[a-zA-Z0-9_\\-]+)?)$", i, m.Role)
		}
		if m.Parts == nil {
			return fmt.Sprintf("input[%d].parts: field required", i)
		}
	}
	return ""
}

// customerOf reads {"customer": ...} (or "beneficiary") from a JSON part.
func customerOf(input []acpMessage) string {
	for _, m := range input {
		for _, p := range m.Parts {
			if p.Content == nil || !strings.HasPrefix(p.ContentType, "application/json") {
				continue
			}
			var v map[string]any
			if json.Unmarshal([]byte(*p.Content), &v) != nil {
				continue
			}
			for _, k := range []string{"customer", "beneficiary"} {
				if c, ok := v[k].(string); ok && c != "" {
					return c
				}
			}
		}
	}
	return acpDefaultCustomer
}

// newRun registers a run, logs run.created and starts its worker. It returns
// the run as created; ok is false when maxRuns runs are all still active.
func (s *acpServer) newRun(session, customer string) (*run, acpRun, bool) {
	ctx, cancel := context.WithCancel(s.life)
	rn := &run{
		r: acpRun{
			AgentName: ACPAgentName, SessionID: session, RunID: newUUID(),
			Status: "created", Output: []acpMessage{}, CreatedAt: now(),
		},
		customer: customer,
		changed:  make(chan struct{}),
		done:     make(chan struct{}),
		cancel:   cancel,
	}
	s.mu.Lock()
	if len(s.runs) >= s.max && !s.evictLocked() {
		s.mu.Unlock()
		cancel()
		return nil, acpRun{}, false
	}
	s.runs[rn.r.RunID] = rn
	s.order = append(s.order, rn.r.RunID)
	s.emitRunLocked(rn, "run.created")
	snap := cloneRun(rn.r)
	s.mu.Unlock()
	go s.work(ctx, rn)
	return rn, snap, true
}

// evictLocked forgets the oldest finished run.
func (s *acpServer) evictLocked() bool {
	for i, id := range s.order {
		if rn := s.runs[id]; rn == nil || terminal(rn.r.Status) {
			delete(s.runs, id)
			s.order = append(s.order[:i:i], s.order[i+1:]...)
			return true
		}
	}
	return false
}

// work runs the agent: in-progress, the delay, the output message, completed.
func (s *acpServer) work(ctx context.Context, rn *run) {
	s.mu.Lock()
	if rn.r.Status == "created" {
		rn.r.Status = "in-progress"
		s.emitRunLocked(rn, "run.in-progress")
	}
	s.mu.Unlock()

	timer := time.NewTimer(s.delay)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil || rn.r.Status == "cancelling" {
		rn.r.Status = "cancelled"
		t := now()
		rn.r.FinishedAt = &t
		s.emitRunLocked(rn, "run.cancelled")
		close(rn.done)
		return
	}
	created := now()
	text := fmt.Sprintf("KYC refresh complete for %s: documents verified, risk rating unchanged (medium).", rn.customer)
	data, _ := json.Marshal(map[string]any{
		"customer": rn.customer, "documents_verified": true, "risk_rating": "medium", "next_review_days": 365,
	})
	js := string(data)
	parts := []acpPart{
		{ContentType: "text/plain", Content: &text},
		{Name: "kyc-refresh", ContentType: "application/json", Content: &js},
	}
	msg := acpMessage{Role: "agent/" + ACPAgentName, Parts: parts}
	s.emitLocked(rn, acpEvent{Type: "message.created", Message: cloneMessage(msg)})
	for i := range parts {
		p := parts[i]
		s.emitLocked(rn, acpEvent{Type: "message.part", Part: &p})
	}
	s.emitLocked(rn, acpEvent{Type: "message.completed", Message: cloneMessage(msg)})
	done := now()
	msg.CreatedAt, msg.CompletedAt = &created, &done
	rn.r.Output = []acpMessage{msg}
	rn.r.Status = "completed"
	rn.r.FinishedAt = &done
	s.emitRunLocked(rn, "run.completed")
	close(rn.done)
}

func (s *acpServer) emitRunLocked(rn *run, typ string) {
	snap := cloneRun(rn.r)
	s.emitLocked(rn, acpEvent{Type: typ, Run: &snap})
}

func (s *acpServer) emitLocked(rn *run, ev acpEvent) {
	rn.events = append(rn.events, ev)
	close(rn.changed)
	rn.changed = make(chan struct{})
}

func (s *acpServer) snapshot(rn *run) acpRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneRun(rn.r)
}

func (s *acpServer) lookup(w http.ResponseWriter, r *http.Request) *run {
	id := r.PathValue("run_id")
	s.mu.Lock()
	rn := s.runs[id]
	s.mu.Unlock()
	if rn == nil {
		acpFail(w, http.StatusNotFound, "not_found", fmt.Sprintf("Run %s not found", id))
	}
	return rn
}

func (s *acpServer) getRun(w http.ResponseWriter, r *http.Request) {
	if rn := s.lookup(w, r); rn != nil {
		writeJSON(w, http.StatusOK, s.snapshot(rn))
	}
}

func (s *acpServer) resumeRun(w http.ResponseWriter, r *http.Request) {
	if rn := s.lookup(w, r); rn != nil {
		acpFail(w, http.StatusForbidden, "invalid_input", fmt.Sprintf("Run %s has no await request", rn.r.RunID))
	}
}

func (s *acpServer) runEvents(w http.ResponseWriter, r *http.Request) {
	rn := s.lookup(w, r)
	if rn == nil {
		return
	}
	s.mu.Lock()
	evs := append([]acpEvent(nil), rn.events...)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

// cancelRun marks the run cancelling, stops its worker and waits (briefly)
// for it to record the cancellation, so the 202 answer normally shows
// "cancelled". A finished run answers 403, as the reference server does.
func (s *acpServer) cancelRun(w http.ResponseWriter, r *http.Request) {
	rn := s.lookup(w, r)
	if rn == nil {
		return
	}
	s.mu.Lock()
	if st := rn.r.Status; terminal(st) {
		s.mu.Unlock()
		acpFail(w, http.StatusForbidden, "invalid_input", fmt.Sprintf("Run in terminal status %s can't be cancelled", st))
		return
	}
	rn.r.Status = "cancelling"
	s.mu.Unlock()
	rn.cancel()
	timer := time.NewTimer(cancelWait)
	defer timer.Stop()
	select {
	case <-rn.done:
	case <-timer.C:
	case <-r.Context().Done():
		return
	}
	writeJSON(w, http.StatusAccepted, s.snapshot(rn))
}

// stream writes the run's events from index from as SSE until it ends.
func (s *acpServer) stream(w http.ResponseWriter, r *http.Request, rn *run, from int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	next := from
	for {
		s.mu.Lock()
		evs := append([]acpEvent(nil), rn.events[next:]...)
		next = len(rn.events)
		changed := rn.changed
		over := terminal(rn.r.Status)
		s.mu.Unlock()
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		if over {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

func cloneRun(r acpRun) acpRun {
	out := make([]acpMessage, len(r.Output))
	for i := range r.Output {
		out[i] = *cloneMessage(r.Output[i])
	}
	r.Output = out
	if r.FinishedAt != nil {
		t := *r.FinishedAt
		r.FinishedAt = &t
	}
	return r
}

func cloneMessage(m acpMessage) *acpMessage {
	m.Parts = append([]acpPart(nil), m.Parts...)
	return &m
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
