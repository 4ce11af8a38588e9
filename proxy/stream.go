package proxy

import (
	"context"
	"errors"
	"io"
	"mime"
	"sync"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

// Streams: the agent's SSE answer relayed event by event. There is one relay
// loop (Stream); a door that reads the answer from a body (the sidecar, a
// followed task's subscription) runs it over the body, a door that is shown
// the answer in chunks (ext_proc) runs it over Chunks.

// isEventStream reports whether a content type is SSE's.
func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// relay passes an upstream SSE answer on event by event, observing each.
type relay struct {
	p      *Plan
	ctx    context.Context
	reader wire.EventReader
	done   bool
}

// relay reads the agent's stream from body. A stream that is not a protocol
// writ reads (no Answers role) is passed on in whole blocks, unobserved.
func (p *Plan) relay(ctx context.Context, body io.Reader) *relay {
	r := &relay{p: p, ctx: ctx}
	if ans, ok := p.x.edge.(adapters.Answers); ok {
		r.reader = ans.NewStreamReader(&p.x.req, body, p.core.cfg.Limits.MaxEventBytes)
	} else {
		r.reader = rawEvents{wire.NewSSEReader(body, p.core.cfg.Limits.MaxEventBytes)}
	}
	return r
}

// rawEvents yields SSE blocks with no lifecycle events.
type rawEvents struct{ r *wire.SSEReader }

func (e rawEvents) Next() (wire.SSEEvent, []task.Event, error) {
	ev, err := e.r.Next()
	return ev, nil, err
}

// Next returns the bytes to pass on for the next event of the stream. A block
// that is not a valid event is replaced by the protocol's error event (and the
// store is left unchanged by it). At the end of the stream it returns io.EOF;
// when the stream breaks off it returns the error event to send with the read
// error (nil bytes when the caller's own context ended). An event that revealed
// a task the store could not record ends the stream with an error event.
func (r *relay) Next() ([]byte, error) {
	if r.done {
		return nil, io.EOF
	}
	p := r.p
	ev, evs, err := r.reader.Next()
	if err != nil && len(ev.Raw) == 0 {
		r.done = true
		if errors.Is(err, io.EOF) || r.ctx.Err() != nil {
			return nil, err
		}
		return p.streamFault(task.NewFault(task.KindUpstreamUnavailable, "the agent's stream broke off")), err
	}
	if err != nil {
		p.invalid++
		p.core.log.Warn("the agent sent an invalid stream event; replaced by an error event",
			"agent", p.x.rt.agent.Name, "error", err)
		return p.streamFault(task.NewFault(task.KindUpstreamInvalid, "the agent sent an invalid event")), nil
	}
	p.core.upstreamErrors(p, evs)
	if p.x.eg == nil {
		p.core.observe(context.WithoutCancel(r.ctx), p, evs)
		p.sync(context.WithoutCancel(r.ctx))
	}
	if p.failed != nil {
		r.done = true
		return p.streamFault(p.failure()), p.failed // logged and counted where it failed
	}
	return ev.Raw, nil
}

// streamFault renders a fault as one event of the request's stream.
func (p *Plan) streamFault(f *task.Fault) []byte {
	if ans, ok := p.x.edge.(adapters.Answers); ok {
		return ans.RenderStreamFault(&p.x.req, f)
	}
	return nil
}

// errEmit marks the end of a stream whose door could not pass an event on.
var errEmit = errors.New("the door could not pass the stream on")

// Stream relays the agent's SSE answer, read from body, event by event: each
// event is observed (recorded in the lifecycle store, push callbacks
// notified), then what the caller gets for it — the event as the agent sent
// it, or the protocol's error event in place of an invalid one or of the
// rest of a stream that broke off — is handed to emit, once per event read
// (with nothing to pass on, too: a door may count it as activity). It never
// holds more than one event.
//
// It returns the failure to report in the served event: events.UpstreamBroken
// when the agent's stream broke off, or an event revealed a task the store
// could not record, while ctx was live (logged here); "" at the end of the
// stream, once ctx ended (the caller went away, or the door cancelled it),
// or when emit failed (the caller's connection is gone).
func (p *Plan) Stream(ctx context.Context, body io.Reader, emit func([]byte) error) (failure string) {
	ctx = p.within(ctx)
	r := p.relay(ctx, body)
	for {
		out, err := r.Next()
		if eerr := emit(out); eerr != nil {
			err = errEmit
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), errors.Is(err, errEmit), ctx.Err() != nil:
			return ""
		}
		p.core.log.Warn("upstream stream ended with an error", "agent", p.x.rt.agent.Name, "error", err)
		return events.UpstreamBroken
	}
}

// Chunks is the relay of an SSE answer a door is shown in chunks, one message
// at a time (Envoy's ext_proc): the same loop as Stream, reading the chunks
// fed to it. Feed hands it one chunk and returns once the relay has read all
// of it and waits for more — by then every event the chunk completed has
// been observed — with what the relay passes on for it. Chunk boundaries need
// not line up with events: an event split across chunks is passed on with
// the chunk that completes it. Chunks is used by one goroutine (the door's);
// the relay runs in its own until the last chunk, or Abort.
type Chunks struct {
	chunks chan []byte   // to the relay's reader; closed at the end of the body
	want   chan struct{} // the reader has consumed everything and waits
	done   chan struct{} // the relay ended
	stop   chan struct{} // the door went away
	cancel context.CancelFunc

	ready    bool // the reader is waiting for a chunk (its want was received)
	finished bool // done was seen
	closed   bool // chunks is closed
	stopped  bool

	cur []byte // the reader's current chunk (reader goroutine only)
	eof bool   // the body ended (reader goroutine only): every later Read is io.EOF

	mu      sync.Mutex
	out     []byte
	failure string
}

// errAborted ends a relay whose door went away.
var errAborted = errors.New("the stream ended before the answer did")

// Chunks starts the relay of an SSE answer the door is shown in chunks.
func (p *Plan) Chunks(ctx context.Context) *Chunks {
	ctx = p.within(ctx)
	ctx, cancel := context.WithCancel(ctx)
	c := &Chunks{chunks: make(chan []byte), want: make(chan struct{}), done: make(chan struct{}),
		stop: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(c.done)
		failure := p.Stream(ctx, readerFunc(c.read), func(out []byte) error {
			c.mu.Lock()
			c.out = append(c.out, out...)
			c.mu.Unlock()
			return nil
		})
		c.mu.Lock()
		c.failure = failure
		c.mu.Unlock()
	}()
	return c
}

// readerFunc is an io.Reader of a read function.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// read is the relay's side: the current chunk, then a wait for the next.
func (c *Chunks) read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		if c.eof {
			// The SSE reader reads again after the last event it completed
			// at the end of the body.
			return 0, io.EOF
		}
		select {
		case c.want <- struct{}{}:
		case <-c.stop:
			return 0, errAborted
		}
		select {
		case chunk, ok := <-c.chunks:
			if !ok {
				c.eof = true
				return 0, io.EOF
			}
			c.cur = chunk
		case <-c.stop:
			return 0, errAborted
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// wait blocks until the reader asks for more or the relay ended.
func (c *Chunks) wait() {
	if c.ready || c.finished {
		return
	}
	select {
	case <-c.want:
		c.ready = true
	case <-c.done:
		c.finished = true
	}
}

// Feed gives the relay one chunk (eos: the last) and returns the bytes it
// passed on for it. Once the relay ended (the stream is over, or broke off),
// chunks are dropped.
func (c *Chunks) Feed(chunk []byte, eos bool) []byte {
	c.wait()
	if len(chunk) > 0 && !c.finished {
		select {
		case c.chunks <- chunk:
			c.ready = false
		case <-c.done:
			c.finished = true
		}
		c.wait()
	}
	if eos && !c.closed {
		c.closed = true
		close(c.chunks)
		<-c.done
		c.finished = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.out
	c.out = nil
	return out
}

// Failure is how the relay ended, as Stream reports it: "" so far, or at the
// end of the stream.
func (c *Chunks) Failure() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

// Abort ends the relay (the door went away before the answer ended) and
// waits for it. A relay aborted is not a stream that broke off.
func (c *Chunks) Abort() {
	if !c.stopped {
		c.stopped = true
		c.cancel()
		close(c.stop)
	}
	<-c.done
}
