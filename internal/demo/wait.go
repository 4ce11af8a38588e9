package demo

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	a2aadapter "github.com/writ-authz/writ/adapters/a2a"
)

// How long the demo waits for something writ or an agent does on its own
// (a push delivery, a task moving to working). A deadline, not a pace: the
// wait ends as soon as the event arrives.
const eventDeadline = 10 * time.Second

// delivery is one notification the demo's receiver got.
type delivery struct {
	token, body string
}

// receiver is the demo's push callback on loopback. Each notification it gets
// is handed over on got.
type receiver struct {
	srv  *http.Server
	url  string // the callback URL
	host string // its host, for the allow-lists
	got  chan delivery
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	r := &receiver{url: "http://" + ln.Addr().String() + "/cb", host: host, got: make(chan delivery, 16)}
	r.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		d := delivery{req.Header.Get(a2aadapter.NotificationTokenHeader), string(body)}
		select {
		case r.got <- d:
		case <-req.Context().Done():
		}
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// wait returns the deliveries once n arrived (and any more already there), or
// what arrived by the deadline or the end of ctx.
func (r *receiver) wait(ctx context.Context, n int) []delivery {
	deadline := time.NewTimer(eventDeadline)
	defer deadline.Stop()
	var out []delivery
wait:
	for len(out) < n {
		select {
		case d := <-r.got:
			out = append(out, d)
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	for {
		select {
		case d := <-r.got:
			out = append(out, d)
		default:
			return out
		}
	}
}

func (r *receiver) close() { _ = r.srv.Close() }

// taskStates remembers the states every agent task has been in, as the
// agents' state hooks report them, and wakes whoever waits for one.
type taskStates struct {
	mu      sync.Mutex
	seen    map[a2a.TaskID][]a2a.TaskState
	changed chan struct{} // closed (and replaced) on every change
}

func newTaskStates() *taskStates {
	return &taskStates{seen: map[a2a.TaskID][]a2a.TaskState{}, changed: make(chan struct{})}
}

// record is the agents' state hook.
func (s *taskStates) record(id a2a.TaskID, state a2a.TaskState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[id] = append(s.seen[id], state)
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait returns once task id has been in state want, with the task's latest
// state; ok is false when the deadline or ctx came first.
func (s *taskStates) wait(ctx context.Context, id a2a.TaskID, want a2a.TaskState) (latest a2a.TaskState, ok bool) {
	deadline := time.NewTimer(eventDeadline)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		seen, changed := s.seen[id], s.changed
		s.mu.Unlock()
		if len(seen) > 0 {
			latest = seen[len(seen)-1]
		}
		if slices.Contains(seen, want) {
			return latest, true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return latest, false
		case <-ctx.Done():
			return latest, false
		}
	}
}
