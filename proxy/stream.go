package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/writ-authz/writ/task"
)

// relayStream passes an upstream SSE answer on event by event, flushing each, and
// observes every event. It never buffers the whole stream. A stream silent for
// longer than the idle timeout is closed; a caller that goes away cancels the
// upstream request (its context is the caller's). A block that is not a valid
// event reaches the caller as the protocol's error event, and the store is left
// unchanged by it.
func (s *Server) relayStream(w http.ResponseWriter, x *exchange, resp *http.Response, cancel context.CancelFunc) {
	flusher, _ := w.(http.Flusher)
	writeAnswerHead(w, x, resp)
	if flusher != nil {
		flusher.Flush()
	}
	idle := s.cfg.Limits.StreamIdleTimeout
	var mu sync.Mutex
	timedOut := false
	timer := time.AfterFunc(idle, func() {
		mu.Lock()
		timedOut = true
		mu.Unlock()
		cancel()
	})
	defer timer.Stop()
	reader := x.edge.NewStreamReader(&x.req, resp.Body, s.cfg.Limits.MaxEventBytes)
	ctx := context.WithoutCancel(resp.Request.Context())
	for {
		ev, events, err := reader.Next()
		timer.Reset(idle)
		if err != nil && len(ev.Raw) == 0 {
			if errors.Is(err, io.EOF) {
				return
			}
			mu.Lock()
			idleEnd := timedOut
			mu.Unlock()
			if idleEnd {
				s.log.Info("stream closed after the idle timeout", "agent", x.rt.agent.Name, "idle", idle)
				return
			}
			if resp.Request.Context().Err() == nil {
				s.log.Warn("upstream stream ended with an error", "agent", x.rt.agent.Name, "error", err)
				_, _ = w.Write(x.edge.RenderStreamFault(&x.req, task.NewFault(task.KindUpstreamUnavailable, "the agent's stream broke off")))
				if flusher != nil {
					flusher.Flush()
				}
			}
			return
		}
		if err != nil {
			s.stats.InvalidUpstream.Add(1)
			s.log.Warn("the agent sent an invalid stream event; replaced by an error event",
				"agent", x.rt.agent.Name, "error", err)
			_, werr := w.Write(x.edge.RenderStreamFault(&x.req, task.NewFault(task.KindUpstreamInvalid, "the agent sent an invalid event")))
			if werr != nil {
				return
			}
		} else {
			if _, werr := w.Write(ev.Raw); werr != nil {
				return
			}
			s.observe(ctx, x, events)
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}
