package seedagents

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
)

// Texts the agents answer with, as in the seed's worked example.
const (
	DefaultBeneficiary = "Acme Trading FZE"
	ScreeningDone      = "Screening complete."
	ClarifyQuestion    = "Which jurisdiction should I screen against?"
	ClarifyDone        = "Screened. No matches."
	CancelledText      = "Screening cancelled."
	ArtifactName       = "sanctions-screening"
)

const (
	sanctionsName = "sanctions-screening-agent"
	clarifierName = "clarifier"
	slowName      = "slow"
	sanctionsDesc = "Screens counterparties against sanctions and watch lists."
	maxTasks      = 1000 // tasks kept per agent; the oldest is forgotten first
)

type behaviour int

const (
	sanctions behaviour = iota
	clarifier
	slow
)

// StartSanctions starts "sanctions-screening-agent": each message moves a
// new task to working, adds the "sanctions-screening" artifact (a text part
// "<beneficiary>: 1 possible match (score 0.83) against SDN list" and a data
// part {matches, top_score, list, recommendation}) and completes it with
// "Screening complete.". The beneficiary comes from a data part
// {"beneficiary": ...}, default "Acme Trading FZE".
func StartSanctions(opts ...Option) (*Agent, error) {
	return startA2A(sanctions, newConfig(sanctionsName, defaultSlow, opts),
		sanctionsDesc)
}

// StartClarifier starts "clarifier": the first message on a task moves it to
// working and then input-required ("Which jurisdiction should I screen
// against?"); a follow-up message on the same task moves it to working and
// completes it ("Screened. No matches.").
func StartClarifier(opts ...Option) (*Agent, error) {
	return startA2A(clarifier, newConfig(clarifierName, defaultSlow, opts),
		"Screens counterparties against sanctions lists; asks which jurisdiction first.")
}

// StartSlow starts "slow": a message moves the task to working, and it stays
// there until it is cancelled (then canceled), the agent closes, or the delay
// (WithDelay, default 30s) passes; then it screens as the sanctions agent does.
// Use a streaming or non-blocking send to get the task id before it ends.
func StartSlow(opts ...Option) (*Agent, error) {
	return startA2A(slow, newConfig(slowName, defaultSlow, opts),
		"Screens counterparties slowly; for cancellation and deadline tests.")
}

func startA2A(kind behaviour, cfg *config, desc string) (*Agent, error) {
	ln, base, err := listen()
	if err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	a := &Agent{Name: cfg.name, URL: base, stop: stop}
	cardURL := cfg.cardURL
	if cardURL == "" {
		cardURL = base + "/"
	}
	a.Card = newCard(cfg.name, desc, cardURL, cfg.push)

	store := newTaskStore(maxTasks, cfg.onState)
	hopts := []a2asrv.RequestHandlerOption{
		a2asrv.WithTaskStore(store),
		a2asrv.WithLogger(cfg.logger),
		a2asrv.WithCallInterceptor(taskIDRecorder{a}),
	}
	if cfg.push {
		hopts = append(hopts, a2asrv.WithPushNotifications(push.NewInMemoryStore(),
			push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second})))
	}
	exec := &executor{kind: kind, delay: cfg.delay, life: life}
	handler := strictCancel{RequestHandler: a2asrv.NewHandler(exec, hopts...), store: store}

	if cfg.grpc {
		a.serveGRPC(ln, handler)
		return a, nil
	}
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a.observeCard(a2asrv.NewStaticAgentCardHandler(a.Card)))
	mux.Handle("/", a.observeRPC(a2asrv.NewJSONRPCHandler(handler)))
	a.serve(ln, mux)
	return a, nil
}

func newCard(name, desc, url string, pushOn bool) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:               name,
		Description:        desc,
		URL:                url,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "3.1.0",
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: pushOn},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID:          "screen",
			Name:        "Screen a counterparty",
			Description: "Screen a legal entity or individual against SDN, UN and local lists.",
			Tags:        []string{"sanctions", "compliance", "screening"},
			Examples:    []string{"Screen Acme Trading FZE"},
		}},
	}
}

// observeCard records card fetches.
func (a *Agent) observeCard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.record(newObserved(r, r.Method+" "+a2asrv.WellKnownAgentCardPath))
		next.ServeHTTP(w, r)
	})
}

// observeRPC records JSON-RPC calls and hands the request headers to the
// SDK as request metadata (a2a-go's JSON-RPC transport does not).
func (a *Agent) observeRPC(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := newObserved(r, r.Method+" "+r.URL.Path)
		body, err := readBody(w, r)
		if err != nil {
			a.record(o)
			status := http.StatusBadRequest
			if isTooLarge(err) {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "cannot read request body", status)
			return
		}
		o.Body = clip(body)
		if m, id := rpcPeek(body); m != "" {
			o.Method, o.TaskID = m, id
		}
		a.record(o)
		ctx := context.WithValue(r.Context(), observedKey{}, o)
		ctx, _ = a2asrv.WithCallContext(ctx, a2asrv.NewRequestMeta(r.Header))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// taskIDRecorder fills in Observed.TaskID of a request that created a task.
type taskIDRecorder struct{ a *Agent }

// Before lets every call through unchanged.
func (t taskIDRecorder) Before(ctx context.Context, _ *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, error) {
	return ctx, nil
}

// After notes the task id of a successful answer on the request's record.
func (t taskIDRecorder) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	if p, ok := resp.Payload.(interface{ TaskInfo() a2a.TaskInfo }); ok && resp.Err == nil {
		t.a.setTaskID(observedFrom(ctx), string(p.TaskInfo().TaskID))
	}
	return nil
}

// strictCancel answers TaskNotCancelable (-32002) for a task that is already
// in a terminal state, canceled included, as the A2A spec words it. (a2a-go
// v0.3.3 on its own answers a repeated cancel with the canceled task.)
type strictCancel struct {
	a2asrv.RequestHandler
	store *taskStore
}

// OnCancelTask refuses a terminal task, then defers to the SDK.
func (h strictCancel) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	if p != nil {
		if t, err := h.store.Get(ctx, p.ID); err == nil && t.Status.State.Terminal() {
			return nil, fmt.Errorf("task %s is %s: %w", p.ID, t.Status.State, a2a.ErrTaskNotCancelable)
		}
	}
	return h.RequestHandler.OnCancelTask(ctx, p)
}

// executor implements the three behaviours.
type executor struct {
	kind  behaviour
	delay time.Duration
	life  context.Context // done when the agent closes
}

// Execute runs the agent's behaviour for one message.
func (e *executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	switch e.kind {
	case clarifier:
		if err := writeStatus(ctx, q, rc, a2a.TaskStateWorking, "", false); err != nil {
			return err
		}
		if rc.StoredTask == nil {
			return writeStatus(ctx, q, rc, a2a.TaskStateInputRequired, ClarifyQuestion, true)
		}
		return writeStatus(ctx, q, rc, a2a.TaskStateCompleted, ClarifyDone, true)
	case slow:
		if err := writeStatus(ctx, q, rc, a2a.TaskStateWorking, "", false); err != nil {
			return err
		}
		timer := time.NewTimer(e.delay)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			// A cancel was applied: the SDK cancels the execution context
			// once the canceled status is stored.
			return nil
		case <-e.life.Done():
			return e.life.Err()
		case <-timer.C:
		}
		return screen(ctx, q, rc, false)
	default:
		return screen(ctx, q, rc, true)
	}
}

// Cancel moves the task to canceled.
func (e *executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return writeStatus(ctx, q, rc, a2a.TaskStateCanceled, CancelledText, true)
}

// screen adds the screening artifact and completes the task.
func screen(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, working bool) error {
	if working {
		if err := writeStatus(ctx, q, rc, a2a.TaskStateWorking, "", false); err != nil {
			return err
		}
	}
	name := beneficiary(rc.Message)
	ev := a2a.NewArtifactEvent(rc,
		a2a.TextPart{Text: name + ": 1 possible match (score 0.83) against SDN list"},
		a2a.DataPart{Data: map[string]any{
			"matches": 1, "top_score": 0.83, "list": "SDN", "recommendation": "manual_review",
		}},
	)
	ev.Artifact.ID = "art-1"
	ev.Artifact.Name = ArtifactName
	ev.Artifact.Description = "Screening result with match detail"
	ev.LastChunk = true
	if err := q.Write(ctx, ev); err != nil {
		return err
	}
	return writeStatus(ctx, q, rc, a2a.TaskStateCompleted, ScreeningDone, true)
}

func writeStatus(ctx context.Context, q eventqueue.Queue, rc *a2asrv.RequestContext, st a2a.TaskState, text string, final bool) error {
	var msg *a2a.Message
	if text != "" {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: text})
	}
	ev := a2a.NewStatusUpdateEvent(rc, st, msg)
	ev.Final = final
	return q.Write(ctx, ev)
}

// beneficiary reads {"beneficiary": ...} from a data part of m.
func beneficiary(m *a2a.Message) string {
	if m != nil {
		for _, p := range m.Parts {
			var data map[string]any
			switch d := p.(type) {
			case a2a.DataPart:
				data = d.Data
			case *a2a.DataPart:
				data = d.Data
			}
			if s, ok := data["beneficiary"].(string); ok && strings.TrimSpace(s) != "" {
				return s
			}
		}
	}
	return DefaultBeneficiary
}

// taskStore is an in-memory a2asrv.TaskStore that keeps at most max tasks,
// forgetting the oldest first. Tasks are deep-copied (gob, as the SDK's own
// store does) on the way in and out.
type taskStore struct {
	mu     sync.Mutex
	max    int
	tasks  map[a2a.TaskID][]byte
	states map[a2a.TaskID]a2a.TaskState
	order  []a2a.TaskID
	// onState, when set, hears every change of a stored task's state.
	onState func(a2a.TaskID, a2a.TaskState)
}

func newTaskStore(max int, onState func(a2a.TaskID, a2a.TaskState)) *taskStore {
	return &taskStore{max: max, tasks: make(map[a2a.TaskID][]byte),
		states: make(map[a2a.TaskID]a2a.TaskState), onState: onState}
}

// Save stores a copy of t and tells onState when t's state changed.
func (s *taskStore) Save(_ context.Context, t *a2a.Task) error {
	if t == nil || t.ID == "" {
		return fmt.Errorf("seedagents: task without an id: %w", a2a.ErrInvalidParams)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(t); err != nil {
		return fmt.Errorf("seedagents: store task: %w", err)
	}
	s.mu.Lock()
	if _, ok := s.tasks[t.ID]; !ok {
		s.order = append(s.order, t.ID)
		for len(s.order) > s.max {
			delete(s.tasks, s.order[0])
			delete(s.states, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.tasks[t.ID] = buf.Bytes()
	prev, known := s.states[t.ID]
	s.states[t.ID] = t.Status.State
	s.mu.Unlock()
	if s.onState != nil && (!known || prev != t.Status.State) {
		s.onState(t.ID, t.Status.State)
	}
	return nil
}

// Get returns a copy of the task, or a2a.ErrTaskNotFound.
func (s *taskStore) Get(_ context.Context, id a2a.TaskID) (*a2a.Task, error) {
	s.mu.Lock()
	b, ok := s.tasks[id]
	s.mu.Unlock()
	if !ok {
		return nil, a2a.ErrTaskNotFound
	}
	var t a2a.Task
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&t); err != nil {
		return nil, fmt.Errorf("seedagents: load task: %w", err)
	}
	return &t, nil
}
