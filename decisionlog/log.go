// Package decisionlog writes writ's audit stream: one JSON line per decision, lifecycle event and push delivery.
package decisionlog

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"os"
	"path/filepath"
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

// Stats are a Log's counters since it was built, in lines of events
// (decisions, lifecycle, push); the log's custody lines (log_started,
// log_continued, checkpoint, lines_lost) are not counted.
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
	pendingN   uint64        // event lines in pending
	line       []byte        // scratch for one line
	closeErr   error         // set before done is closed
	rotateErrs uint64
	writeFails uint64

	// The chain of custody (custody.go), owned by the writer goroutine.
	logID     string
	signer    *Signer // nil: checkpoints are unsigned
	every     int     // lines between checkpoints
	chain     chainState
	committed chainState // the chain as the output has it: after the last good write
	// fresh: the live file holds no line but the header this run wrote (a
	// huge line goes into such a file rather than rotating it again).
	fresh bool
	// reserve is the room a file keeps for the checkpoints it may still be
	// owed: a line is placed only where it and two checkpoints fit.
	reserve   int
	scratch   []byte // scratch for a checkpoint's payload
	signFails uint64
}

type kind uint8

const (
	kindDecision kind = iota + 1
	kindTask
	kindPush // an attempt or an outcome: PushType tells
	kindShadow
)

// entry is one queued event; entries are pooled so that queueing allocates
// nothing.
type entry struct {
	kind kind
	d    events.Decision
	t    events.Task
	p    events.Push
	sh   events.ShadowDisagreement
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
	logID    string // default a random one
}

// New opens the decision log cfg names: "stdout" (also ""), "stderr", "off", or
// a file path. A file is created 0600 if missing, appended to, and rotated when
// a line would take it beyond MaxSizeMB: file becomes file.1, file.1 becomes file.2, …,
// and at most MaxBackups rotated files are kept. Zero values take the defaults.
//
// Every line is chained to the one before it and checkpoints are written
// every CheckpointEvery lines, at rotation and at close, signed with the key
// in SigningKeyFile when there is one (custody.go). Appending to a file, the
// log chains to the file's last line.
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
		return start(nil, cfg, o, nil)
	case "stdout":
		return start(os.Stdout, cfg, o, nil)
	case "stderr":
		return start(os.Stderr, cfg, o, nil)
	}
	maxBytes := o.maxBytes
	if maxBytes <= 0 {
		maxBytes = int64(cfg.MaxSizeMB) << 20
	}
	rot, err := openRotating(cfg.Output, maxBytes, cfg.MaxBackups)
	if err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	l, err := start(rot, cfg, o, rot)
	if err != nil {
		return nil, errors.Join(err, rot.Close())
	}
	return l, nil
}

// NewWriter is a Log writing to w (never closed by the Log), without
// rotation; cfg's Output "off" still turns it off, and an unknown Format is
// taken as "writ". Its lines are chained and checkpointed as New's are. For
// tests and embedding.
func NewWriter(w io.Writer, cfg config.DecisionLog) (*Log, error) {
	return newWriter(w, cfg, options{})
}

func newWriter(w io.Writer, cfg config.DecisionLog, o options) (*Log, error) {
	cfg = withDefaults(cfg)
	if cfg.Output == "off" {
		w = nil
	}
	return start(w, cfg, o, nil)
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
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = config.DefaultCheckpointEvery
	}
	return cfg
}

// start builds the Log and its writer; w nil is "off". rot is w when w is a
// rotating file.
func start(w io.Writer, cfg config.DecisionLog, o options, rot *rotatingFile) (*Log, error) {
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
		return l, nil
	}
	if err := l.custody(cfg, o, rot); err != nil {
		return nil, err
	}
	l.w = w
	l.ch = make(chan *entry, cfg.Buffer)
	l.pending = make([]byte, 0, flushAt+4096)
	go l.run()
	return l, nil
}

// custody sets up the chain: the key, the log's id, and where the chain
// starts (the genesis, or the last line of the file appended to).
func (l *Log) custody(cfg config.DecisionLog, o options, rot *rotatingFile) error {
	if cfg.SigningKeyFile != "" {
		s, err := LoadSigner(cfg.SigningKeyFile)
		if err != nil {
			return fmt.Errorf("decisionlog: signing_key_file: %w", err)
		}
		l.signer = s
	}
	l.every = cfg.CheckpointEvery
	l.logID = o.logID
	if l.logID == "" {
		l.logID = newLogID()
	}
	l.chain.head = Genesis(l.logID)
	if rot != nil {
		l.rot, l.closer = rot, rot
		last, err := readLastLine(rot.path, rot.size)
		if err != nil {
			return fmt.Errorf("decisionlog: %s: %w", rot.path, err)
		}
		if last != nil {
			if last[len(last)-1] != '\n' {
				l.chain.torn = true
				last = append(last, '\n')
			}
			l.chain.head = sha256.Sum256(last)
		}
		l.fresh = rot.size == 0
	}
	l.committed = l.chain
	n, err := l.checkpointBound()
	if err != nil {
		return fmt.Errorf("decisionlog: signing a checkpoint: %w", err)
	}
	l.reserve = 2 * n
	return nil
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
// task_artifact, task_protocol_violation, task_evicted, upstream_error).
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
	e.kind, e.p = kindPush, ev
	if e.p.Time.IsZero() {
		e.p.Time = l.now()
	}
	l.enqueue(e)
}

var _ events.ShadowSink = (*Log)(nil)

// ShadowDisagreed implements events.ShadowSink: a shadow_disagreement line
// (in both formats: it is no decision of OPA's).
func (l *Log) ShadowDisagreed(ev events.ShadowDisagreement) {
	if l.off {
		return
	}
	e := entries.Get().(*entry)
	e.kind, e.sh = kindShadow, ev
	if e.sh.Time.IsZero() {
		e.sh.Time = l.now()
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
		// Lines lost are told once a batch: a flood that drops lines must
		// not double the lines the writer has to write.
		l.tellLost()
		l.handle(e)
		for len(l.pending) < flushAt && len(l.ch) > 0 {
			l.handle(<-l.ch) // one reader: a buffered value is there
		}
		l.flush()
	}
	if l.chain.started || l.dropped.Load() != l.chain.dropped || l.errors.Load() != l.chain.failed {
		// The log ends with its closing checkpoint, after telling of any
		// line lost (the lines dropped by Close's deadline among them).
		l.begin()
		l.tellLost()
		l.checkpoint(CheckpointClose)
	}
	l.flush()
	if l.closer != nil {
		l.closeErr = l.closer.Close()
	}
}

// handle encodes one entry into pending, rotating first when it would not
// fit, and writes a checkpoint when one is due.
func (l *Log) handle(e *entry) {
	if l.abort.Load() {
		release(e)
		l.dropped.Add(1)
		return
	}
	l.begin()
	l.line = l.encode(l.line[:0], e)
	if l.room(len(l.line)) {
		l.line = l.encode(l.line[:0], e) // its place in the chain moved
	}
	release(e)
	l.push(l.line)
	l.pendingN++
	l.checkpointDue()
}

// begin writes the run's log_started line before its first line.
func (l *Log) begin() {
	if !l.chain.started {
		if l.chain.torn {
			// End the line a crash cut short, so that this run's first line
			// stands on its own; the chain counts the newline as that line's.
			l.pending = append(l.pending, '\n')
			l.chain.torn = false
		}
		s := l.chain.next()
		l.line = appendLogStarted(l.line[:0], l.now(), l.logID, &s)
		if l.room(len(l.line)) {
			// The file appended to is full: the run starts in a fresh one,
			// chained to the rotated file's last line.
			s = l.chain.next()
			l.line = appendLogStarted(l.line[:0], l.now(), l.logID, &s)
		}
		l.chain.started = true
		l.pushHeader(l.line)
	}
}

// tellLost writes a lines_lost line when lines were lost (dropped, or lost
// to a failed write) since the log last told.
func (l *Log) tellLost() {
	dropped, failed := l.dropped.Load(), l.errors.Load()
	if dropped == l.chain.dropped && failed == l.chain.failed {
		return
	}
	l.begin()
	s := l.chain.next()
	l.line = appendLinesLost(l.line[:0], l.now(), dropped-l.chain.dropped, failed-l.chain.failed, &s)
	if l.room(len(l.line)) {
		s = l.chain.next()
		l.line = appendLinesLost(l.line[:0], l.now(), dropped-l.chain.dropped, failed-l.chain.failed, &s)
	}
	l.chain.dropped, l.chain.failed = dropped, failed
	l.push(l.line)
	l.checkpointDue()
}

// push appends a sealed line to pending and makes it the chain's head.
func (l *Log) push(line []byte) {
	l.pending = append(l.pending, line...)
	l.chain.advance(line)
	l.fresh = false
}

// pushHeader pushes a file's header line, which leaves a fresh file fresh.
func (l *Log) pushHeader(line []byte) {
	fresh := l.fresh
	l.push(line)
	l.fresh = fresh
}

// room rotates the file first when a line of n bytes, and the checkpoints
// the file may still be owed, would take it beyond its threshold; it reports
// whether it rotated (the line's place in the chain then moved). A file
// holding no line but its header is never rotated: a line larger than the
// threshold goes there alone.
func (l *Log) room(n int) bool {
	if l.rot == nil || l.fresh || !l.rot.full(len(l.pending), n+l.reserve) {
		return false
	}
	l.rotate()
	return true
}

// rotate ends the file with a checkpoint, rotates it, and starts the new
// file with a log_continued line chained to the old file's last line.
func (l *Log) rotate() {
	if l.chain.started {
		l.checkpoint(CheckpointRotation)
	}
	l.flush()
	if l.rot.size == 0 {
		return // nothing was written: the file is already fresh
	}
	err := l.rot.rotate()
	if err != nil {
		l.rotateErrs++
		if bits.OnesCount64(l.rotateErrs) == 1 {
			l.logger.Error("decisionlog: rotation failed", "path", l.rot.path, "error", err, "failures_total", l.rotateErrs)
		}
	}
	l.fresh = l.rot.size == 0
	if !l.chain.started {
		return
	}
	s := l.chain.next()
	l.line = appendLogContinued(l.line[:0], l.now(), l.logID, filepath.Base(l.rot.name(1)), &s)
	l.pushHeader(l.line)
}

// checkpointDue writes an interval checkpoint after every l.every lines.
func (l *Log) checkpointDue() {
	if l.chain.since >= l.every {
		l.checkpoint(CheckpointInterval)
	}
}

// checkpoint appends a checkpoint line: signed when the log has a key. A
// signing failure (which Ed25519 cannot have, nor ECDSA short of the
// system's randomness failing) is logged, and the checkpoint written unsigned:
// the chain goes on, and Verify names the checkpoint.
func (l *Log) checkpoint(reason string) {
	s := l.chain.next()
	t := l.now()
	jws := ""
	if l.signer != nil {
		l.scratch = appendCheckpointPayload(l.scratch[:0], t, l.logID, reason, &s)
		var err error
		if jws, err = l.signer.sign(l.scratch); err != nil {
			if l.signFails++; bits.OnesCount64(l.signFails) == 1 {
				l.logger.Error("decisionlog: signing a checkpoint failed; it is written unsigned", "error", err, "seq", s.seq, "failures_total", l.signFails)
			}
		}
	}
	l.line = appendCheckpoint(l.line[:0], t, l.logID, reason, jws, &s)
	l.push(l.line)
	l.chain.since = 0
}

// checkpointBound is the longest a checkpoint line of this log can be: one
// with the longest time, seq and reason, signed. The file keeps room for it.
func (l *Log) checkpointBound() (int, error) {
	s := seal{seq: math.MaxUint64}
	t := time.Date(2006, 1, 2, 15, 4, 5, 999999999, time.UTC)
	jws := ""
	if l.signer != nil {
		var err error
		if jws, err = l.signer.sign(appendCheckpointPayload(nil, t, l.logID, CheckpointRotation, &s)); err != nil {
			return 0, err
		}
	}
	return len(appendCheckpoint(nil, t, l.logID, CheckpointRotation, jws, &s)), nil
}

// encode writes e as the chain's next line.
func (l *Log) encode(b []byte, e *entry) []byte {
	s := l.chain.next()
	switch e.kind {
	case kindDecision:
		if l.opa {
			return appendOPA(b, &e.d, &s)
		}
		return appendDecision(b, &e.d, &s)
	case kindTask:
		return appendTask(b, &e.t, &s)
	case kindPush:
		return appendPush(b, &e.p, &s)
	case kindShadow:
		return appendShadow(b, &e.sh, &s)
	}
	return b
}

// flush writes pending; event lines of a failed write are counted as
// errors, and the chain goes back to the last line the output has, so that
// the next line is chained to it and the loss is told in a lines_lost line.
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
		l.chain = l.committed
	} else {
		l.written.Add(l.pendingN)
		l.committed = l.chain
	}
	l.pending = l.pending[:0]
	l.pendingN = 0
	if cap(l.pending) > 4*flushAt {
		l.pending = make([]byte, 0, flushAt+4096) // one huge line must not pin its buffer
	}
}
