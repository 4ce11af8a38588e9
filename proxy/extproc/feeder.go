package extproc

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/writ-authz/writ/proxy"
)

// errAborted ends a relay whose stream went away.
var errAborted = errors.New("extproc: the stream ended before the answer did")

// feeder turns the body chunks Envoy shows writ one message at a time into the
// io.Reader that Plan.Relay reads, and collects what the relay passes on for
// each chunk. The relay runs in its own goroutine; feed hands it one chunk and
// waits until it has read all of it and asks for more — by then every event
// the chunk completed has been observed and passed on — or until it ended.
// Chunk boundaries need not line up with events: an event split across chunks
// is passed on with the chunk that completes it.
type feeder struct {
	chunks chan []byte   // to the relay's reader; closed at the end of the body
	want   chan struct{} // the reader has consumed everything and waits
	done   chan struct{} // the relay ended
	stop   chan struct{} // the stream went away
	ctx    context.Context

	ready    bool // the reader is waiting for a chunk (its want was received)
	finished bool // done was seen
	closed   bool // chunks is closed
	stopped  bool

	cur []byte // the reader's current chunk (reader goroutine only)
	eof bool   // the body ended (reader goroutine only): every later Read is io.EOF

	mu     sync.Mutex
	out    []byte
	relErr error
}

func newFeeder(ctx context.Context, p *proxy.Plan) *feeder {
	f := &feeder{chunks: make(chan []byte), want: make(chan struct{}), done: make(chan struct{}),
		stop: make(chan struct{}), ctx: ctx}
	relay := p.Relay(ctx, f)
	go func() {
		defer close(f.done)
		for {
			out, err := relay.Next()
			f.mu.Lock()
			f.out = append(f.out, out...)
			if err != nil && !errors.Is(err, io.EOF) {
				f.relErr = err
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return f
}

// Read is the relay's side: the current chunk, then a wait for the next.
func (f *feeder) Read(p []byte) (int, error) {
	for len(f.cur) == 0 {
		if f.eof {
			// The SSE reader reads again after the last event it completed
			// at the end of the body.
			return 0, io.EOF
		}
		select {
		case f.want <- struct{}{}:
		case <-f.stop:
			return 0, errAborted
		}
		select {
		case c, ok := <-f.chunks:
			if !ok {
				f.eof = true
				return 0, io.EOF
			}
			f.cur = c
		case <-f.stop:
			return 0, errAborted
		}
	}
	n := copy(p, f.cur)
	f.cur = f.cur[n:]
	return n, nil
}

// wait blocks until the reader asks for more or the relay ended.
func (f *feeder) wait() {
	if f.ready || f.finished {
		return
	}
	select {
	case <-f.want:
		f.ready = true
	case <-f.done:
		f.finished = true
	}
}

// feed gives the relay one chunk (eos: the last) and returns the bytes it
// passed on for it. Once the relay ended (the stream is over, or broke off),
// chunks are dropped.
func (f *feeder) feed(chunk []byte, eos bool) []byte {
	f.wait()
	if len(chunk) > 0 && !f.finished {
		select {
		case f.chunks <- chunk:
			f.ready = false
		case <-f.done:
			f.finished = true
		}
		f.wait()
	}
	if eos && !f.closed {
		f.closed = true
		close(f.chunks)
		<-f.done
		f.finished = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.out
	f.out = nil
	return out
}

// err is how the relay ended: nil at the end of the stream.
func (f *feeder) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.relErr
}

// abort ends the relay (the stream went away) and waits for it.
func (f *feeder) abort() {
	if !f.stopped {
		f.stopped = true
		close(f.stop)
	}
	<-f.done
}
