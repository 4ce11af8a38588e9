// Package decisionlog writes writ's audit stream: one JSON line per decision, lifecycle event and push delivery.
package decisionlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
)

// Defaults for the zero values of config.DecisionLog, as config applies them.
const (
	DefaultMaxSizeMB  = 100
	DefaultMaxBackups = 5
	DefaultBuffer     = 10000
)

// flushAt is how many encoded bytes the writer collects before a write while
// more lines are waiting; a line is never held once the queue is empty.
const flushAt = 32 << 10

var _ events.Sink = (*Log)(nil)

// Stats are a Log's counters since it was built, in lines.
type Stats struct {
	// Written lines reached the output.
	Written uint64
	// Dropped lines were refused because the buffer was full (or the log was
	// closed, or Close's deadline passed before they were written).
	Dropped uint64
	// Errors counts lines lost to failed writes.
	Errors uint64
}

// Log is the decision log: an events.Sink. Events are queued without blocking and written, in the
// order they were queued, by one goroutine. Safe for concurrent use. An event's
// slices (denials, the caller's chain) are read after the hook returns and must
// not be modified afterwards; the proxy never does.
type Log struct {
	off    bool
	opa    bool
	logger *slog.Logger
	now    func() time.Time

	mu     sync.RWMutex // held shared by senders, exclusively to close ch
	closed bool
	ch     chan *entry
	done   chan struct{} // closed when the writer has exited
	abort  atomic.Bool   // Close's deadline passed: drop what is left

	written, dropped, errors atomic.Uint64

	// Owned by the writer goroutine.
	w          io.Writer
	rot        *rotatingFile // non-nil when writing to a file
	closer     io.Closer     // closed when the writer exits
	pending    []byte        // encoded lines not yet written
	pendingN   uint64        // lines in pending
	line       []byte        // scratch for one line
	closeErr   error         // set before done is closed
	rotateErrs uint64
	writeFails uint64
}

type kind uint8

const (
	kindDecision kind = iota + 1
	kindTask
	kindPushAttempt
	kindPushResult
)

// entry is one queued event; entries are pooled so that queueing allocates
// nothing.
type entry struct {
	kind kind
	d    events.Decision
	t    events.Task
	p    events.Push
}

var entries = sync.Pool{New: func() any { return new(entry) }}

func release(e *entry) {
	*e = entry{}
	entries.Put(e)
}

// options are what tests inject.
type options struct {
	maxBytes int64        // rotation threshold; default MaxSizeMB MiB
	logger   *slog.Logger // default slog.Default()
	now      func() time.Time
}

// New opens the decision log cfg names: "stdout" (also ""), "stderr", "off", or
// a file path. A file is created 0600 if missing, appended to, and rotated when
// a line would take it beyond MaxSizeMB: file becomes file.1, file.1 becomes file.2, …,
// and at most MaxBackups rotated files are kept. Zero values take the defaults.
func New(cfg config.DecisionLog) (*Log, error) {
	return newLog(cfg, options{})
}

func newLog(cfg config.DecisionLog, o options) (*Log, error) {
	cfg = withDefaults(cfg)
	if cfg.Format != "writ" && cfg.Format != "opa" {
		return nil, fmt.Errorf("decisionlog: format must be writ or opa, not %q", cfg.Format)
	}
	switch cfg.Output {
	case "off":
		return start(nil, cfg, o), nil
	case "stdout":
		return start(os.Stdout, cfg, o), nil
	case "stderr":
		return start(os.Stderr, cfg, o), nil
	}
	maxBytes := o.maxBytes
	if maxBytes <= 0 {
		maxBytes = int64(cfg.MaxSizeMB) << 20
	}
	rot, err := openRotating(cfg.Output, maxBytes, cfg.MaxBackups)
	if err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	l := start(rot, cfg, o)
	l.rot, l.closer = rot, rot
	return l, nil
}

// NewWriter is a Log writing to w (never closed by the Log), without
// rotation; cfg's Output "off" still turns it off, and an unknown Format is
// taken as "writ". For tests and embedding.
func NewWriter(w io.Writer, cfg config.DecisionLog) *Log {
	return newWriter(w, cfg, options{})
}

func newWriter(w io.Writer, cfg config.DecisionLog, o options) *Log {
	cfg = withDefaults(cfg)
	if cfg.Output == "off" {
		w = nil
	}
	return start(w, cfg, o)
}

func withDefaults(cfg config.DecisionLog) config.DecisionLog {
	if cfg.Output == "" {
		cfg.Output = "stdout"
	}
	if cfg.MaxSizeMB <= 0 {
		cfg.MaxSizeMB = DefaultMaxSizeMB
	}
	if cfg.MaxBackups <= 0 {
		cfg.MaxBackups = DefaultMaxBackups
	}
	if cfg.Format == "" {
		cfg.Format = "writ"
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	return cfg
}

// start builds the Log and its writer; w nil is "off".
func start(w io.Writer, cfg config.DecisionLog, o options) *Log {
	l := &Log{opa: cfg.Format == "opa", logger: o.logger, done: make(chan struct{})}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	l.now = o.now
	if l.now == nil {
		l.now = time.Now
	}
	if w == nil {
		l.off = true
		l.closed = true
		close(l.done)
		return l
	}
	l.w = w
	l.ch = make(chan *entry, cfg.Buffer)
	l.pending = make([]byte, 0, flushAt+4096)
	go l.run()
	return l
}

// Decided queues a decision line.
func (l *Log) Decided(ev events.Decision) {
	if l.off {
		return
	}
	e := entries.Get().(*entry)
	e.kind, e.d = kindDecision, ev
	if e.d.Time.IsZero() {
		e.d.Time = l.now()
	}
	l.enqueue(e)
}

// Served writes nothing: requests are counted by the metrics; what the log
// audits are the decisions and the lifecycle.
func (l *Log) Served(events.Request) {}

// TaskChanged queues a lifecycle line (task_created, task_state_changed,
// task_artifact, task_protocol_violation, task_evicted).
func (l *Log) TaskChanged(ev events.Task) {
	if l.off {
		return
	}
	e := entries.Get().(*entry)
	e.kind, e.t = kindTask, ev
	if e.t.Time.IsZero() {
		e.t.Time = l.now()
	}
	l.enqueue(e)
}

// Pushed queues a push_attempt line for an attempt, a push_delivered or
// push_failed line for a notification's final outcome.
func (l *Log) Pushed(ev events.Push) {
	if l.off {
		return
	}
	e := entries.Get().(*entry)
	e.kind, e.p = kindPushAttempt, ev
	if ev.Final {
		e.kind = kindPushResult
	}
	if e.p.Time.IsZero() {
		e.p.Time = l.now()
	}
	l.enqueue(e)
}

// enqueue never blocks: a full buffer drops the line.
func (l *Log) enqueue(e *entry) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		release(e)
		l.dropped.Add(1)
		return
	}
	select {
	case l.ch <- e:
		l.mu.RUnlock()
		return
	default:
	}
	l.mu.RUnlock()
	release(e)
	// Log the 1st, 2nd, 4th, 8th... drop: a flood must not become a log flood.
	if n := l.dropped.Add(1); bits.OnesCount64(n) == 1 {
		l.logger.Warn("decisionlog: buffer full; line dropped", "buffer", cap(l.ch), "dropped_total", n)
	}
}

// Stats returns the counters.
func (l *Log) Stats() Stats {
	return Stats{Written: l.written.Load(), Dropped: l.dropped.Load(), Errors: l.errors.Load()}
}

// Close stops accepting lines, writes those already queued and closes the
// file. If ctx ends first, the lines not yet written are dropped (counted),
// the file is closed once the write under way returns, and ctx's error is
// returned. Otherwise it returns the file's close error. Lines logged after
// Close are dropped.
func (l *Log) Close(ctx context.Context) error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	select {
	case <-l.done:
		return l.closeErr
	case <-ctx.Done():
		l.abort.Store(true)
		return ctx.Err()
	}
}

// run is the writer: it encodes and writes every queued line in order,
// batching what is already waiting into one write.
func (l *Log) run() {
	defer close(l.done)
	for e := range l.ch {
		l.handle(e)
		for len(l.pending) < flushAt && len(l.ch) > 0 {
			l.handle(<-l.ch) // one reader: a buffered value is there
		}
		l.flush()
	}
	l.flush()
	if l.closer != nil {
		l.closeErr = l.closer.Close()
	}
}

// handle encodes one entry into pending, rotating first when it would not fit.
func (l *Log) handle(e *entry) {
	if l.abort.Load() {
		release(e)
		l.dropped.Add(1)
		return
	}
	l.line = l.encode(l.line[:0], e)
	release(e)
	if l.rot != nil && l.rot.full(len(l.pending), len(l.line)) {
		l.flush()
		if l.rot.size > 0 {
			if err := l.rot.rotate(); err != nil {
				l.rotateErrs++
				if bits.OnesCount64(l.rotateErrs) == 1 {
					l.logger.Error("decisionlog: rotation failed", "path", l.rot.path, "error", err, "failures_total", l.rotateErrs)
				}
			}
		}
	}
	l.pending = append(l.pending, l.line...)
	l.pendingN++
}

func (l *Log) encode(b []byte, e *entry) []byte {
	switch e.kind {
	case kindDecision:
		if l.opa {
			return appendOPA(b, &e.d)
		}
		return appendDecision(b, &e.d)
	case kindTask:
		return appendTask(b, &e.t)
	case kindPushAttempt:
		return appendPush(b, TypePushAttempt, &e.p)
	case kindPushResult:
		typ := TypePushFailed
		if e.p.Delivered {
			typ = TypePushDelivered
		}
		return appendPush(b, typ, &e.p)
	}
	return b
}

// flush writes pending; lines of a failed write are counted as errors.
func (l *Log) flush() {
	if len(l.pending) == 0 {
		return
	}
	_, err := l.w.Write(l.pending)
	if err != nil {
		n := l.errors.Add(l.pendingN)
		l.writeFails++
		if bits.OnesCount64(l.writeFails) == 1 {
			l.logger.Error("decisionlog: write failed; lines lost", "error", err, "lines", l.pendingN, "errors_total", n)
		}
	} else {
		l.written.Add(l.pendingN)
	}
	l.pending = l.pending[:0]
	l.pendingN = 0
	if cap(l.pending) > 4*flushAt {
		l.pending = make([]byte, 0, flushAt+4096) // one huge line must not pin its buffer
	}
}
