package push

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/lease"
)

// Notification is one rendered push notification for one callback.
type Notification struct {
	TaskID, ContextID string
	// URL is the callback.
	URL string
	// Header is sent with every attempt: the protocol adapter's rendering of
	// the config's token and credentials. It is never logged.
	Header http.Header
	// ContentType and Body are sent as they are; the caller renders them.
	ContentType string
	Body        []byte
	// Seq orders the notifications of one task: a destination gets them in
	// ascending Seq, one at a time. Callers use the time the store recorded the
	// change, so that the order holds across restarts and replicas.
	Seq uint64
	// ID names the notification in the work queue (DelivererConfig.Queue);
	// Enqueue sets it. "" when it is not kept there.
	ID string
	// Owner names who the notification is for (the task's owner), for the
	// per-owner share of the workers; "" names none (the host's share alone
	// applies).
	Owner string
	// Trace is the W3C trace context (the propagator's fields) of the
	// request whose answer raised the notification: each attempt's span is
	// its child, and the receiver gets the attempt's context. nil: each
	// attempt starts a trace (with DelivererConfig.Tracer set).
	Trace map[string]string
}

// Result is the final outcome of one notification, given to OnResult.
type Result struct {
	N         Notification
	Attempts  int
	Status    int   // HTTP status of the last attempt; 0 when none arrived
	Err       error // nil when Delivered; never holds the URL's query or the token
	Delivered bool
	// Latency runs from Enqueue to the final outcome, queueing and retries included.
	Latency time.Duration
}

// Stats are the Deliverer's counters since it was built.
type Stats struct {
	// Queued counts notifications not finished yet; a notification leaves it
	// just after its OnResult returns.
	Queued         int               // notifications accepted and not yet finished
	Delivered      uint64            // got a 2xx
	Failed         uint64            // given up on (guard refusals included)
	Retried        uint64            // attempts scheduled again after a retryable failure
	Dropped        uint64            // refused by Enqueue because the queue was full
	RefusedByGuard map[string]uint64 // failures by guard reason
	// Resumed counts notifications claimed from the work queue: left by a
	// process that stopped (this one before a restart, or another replica).
	Resumed uint64
	// HandedOver counts notifications another holder took over when this
	// process's lease ran out (it then stops attempting them).
	HandedOver uint64
}

// DelivererConfig configures a Deliverer. Zero values take the defaults.
type DelivererConfig struct {
	Workers int // concurrent attempts; default 4
	// MaxPerHost and MaxPerOwner bound the attempts one receiver host, and
	// one owner's notifications, may have in flight or waiting for a worker
	// (default half the workers, at least 1): a receiver that hangs, or one
	// caller's flood of callbacks, holds no more than its share of the
	// workers, and everyone else's deliveries go on.
	MaxPerHost, MaxPerOwner int
	QueueSize               int // cap on unfinished notifications across all destinations; default 10000
	// MaxAttempts caps attempts per notification; default 5.
	MaxAttempts int
	// AttemptTimeout bounds one attempt, response included; default 10s.
	AttemptTimeout time.Duration
	// BaseBackoff and MaxBackoff shape the exponential backoff with full
	// jitter between attempts; defaults 500ms and 30s.
	BaseBackoff, MaxBackoff time.Duration
	// Client sends the requests; default a Guard's client with no trusted hosts.
	Client *http.Client
	// Logger gets overflow and give-up records; default slog.Default().
	Logger *slog.Logger
	// OnResult, when set, is called once per notification with its final
	// outcome, from a worker goroutine: keep it fast.
	OnResult func(Result)
	// OnAttempt, when set, is called after every attempt (Result.Attempts is its
	// number; Delivered or Err says how it went), for an audit trail of each try.
	OnAttempt func(Result)
	// Events, when set, receives every attempt and every final outcome.
	Events events.Sink
	// Queue, when set, keeps every notification until its final outcome, so
	// that a restart or another replica delivers what this one could not:
	// Enqueue puts it there (kind task.WorkPush, leased to Holder) before it
	// queues it in memory, its final outcome removes it, and the Deliverer
	// renews the leases of what it holds and claims the notifications nobody
	// holds (at start, and every third of Lease), queueing them as its own.
	Queue task.WorkQueue
	// Holder names this process in the queue's leases (unique per process).
	Holder string
	// Lease is how long an unrenewed lease lasts (default 30s).
	Lease time.Duration
	// Tracer, when set, makes a span of every attempt (writ.push: the
	// receiver's host, the attempt's number, its status) and sends the
	// attempt's W3C trace context to the receiver; nil traces nothing.
	Tracer trace.Tracer
}

// ErrQueueFull is returned by Enqueue when the queue is at its cap.
var ErrQueueFull = errors.New("push: delivery queue is full")

// ErrClosed is returned by Enqueue after Close, and is the Err of the
// notifications Close abandoned at its deadline.
var ErrClosed = errors.New("push: deliverer is closed")

// StatusError is the Err of a notification whose receiver answered a non-2xx.
type StatusError struct{ Code int }

// Error implements error.
func (e *StatusError) Error() string { return "push: receiver answered " + strconv.Itoa(e.Code) }

// Deliverer sends notifications with a fixed pool of workers. Notifications
// for one (task, URL) go out in Seq order, one at a time; other destinations
// proceed in parallel. A retry waits on a timer, not on a worker. Safe for
// concurrent use.
type Deliverer struct {
	cfg      DelivererConfig
	ready    chan *job // capacity QueueSize: never more than one job per unfinished notification
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once

	mu      sync.Mutex
	dests   map[destKey]*dest
	timers  map[*job]*time.Timer
	pending int
	closed  bool
	aborted bool
	drained chan struct{} // closed when closed && pending == 0
	stats   Stats

	// The work queue, when DelivererConfig.Queue is set: the jobs this
	// process holds by notification id, and the finished ones whose removal
	// from the queue failed (retried by the claim loop).
	held     map[string]*job
	undone   map[string]bool
	loopDone chan struct{}

	// The shares (share.go): attempts in flight or waiting for a worker, by
	// receiver host and by owner, and the jobs waiting for their share.
	byHost, byOwner map[string]int
	parked          []*job
}

type destKey struct{ task, url string }

// dest holds the waiting notifications of one destination, sorted by Seq; busy
// while one of them is in flight or waiting to retry.
type dest struct {
	key   destKey
	queue []*job
	busy  bool
}

type job struct {
	d        *dest
	n        Notification
	attempts int
	enqueued time.Time
	// lost: another holder took the notification over (its lease ran out):
	// this process makes no further attempt.
	lost bool
	// host is the receiver's host; flying is set while the job counts
	// against its host's and owner's shares.
	host   string
	flying bool
}

// NewDeliverer starts a Deliverer's workers. Stop it with Close.
func NewDeliverer(c DelivererConfig) *Deliverer {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 10000
	}
	if c.MaxPerHost <= 0 {
		c.MaxPerHost = max(1, c.Workers/2)
	}
	if c.MaxPerOwner <= 0 {
		c.MaxPerOwner = max(1, c.Workers/2)
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxBackoff < c.BaseBackoff {
		c.MaxBackoff = c.BaseBackoff
	}
	if c.Client == nil {
		c.Client = NewGuard(GuardConfig{}).Client(c.AttemptTimeout, 0)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	d := &Deliverer{
		cfg:     c,
		ready:   make(chan *job, c.QueueSize),
		dests:   map[destKey]*dest{},
		timers:  map[*job]*time.Timer{},
		drained: make(chan struct{}),
		stats:   Stats{RefusedByGuard: map[string]uint64{}},
		held:    map[string]*job{},
		undone:  map[string]bool{},
		byHost:  map[string]int{},
		byOwner: map[string]int{},
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Add(c.Workers)
	for range c.Workers {
		go d.work()
	}
	if c.Queue != nil {
		d.loopDone = make(chan struct{})
		go d.claimLoop()
	}
	return d
}

// Enqueue accepts n for delivery. It returns ErrQueueFull when QueueSize
// notifications are unfinished (the overflow is counted and logged) and
// ErrClosed after Close. With a Queue, it first puts n there (one write to
// the store); if the store fails, n is delivered from memory only.
func (d *Deliverer) Enqueue(n Notification) error {
	if d.cfg.Queue != nil {
		if err := d.admissible(n); err != nil {
			return err
		}
		n.ID = newWorkID()
		ctx, cancel := context.WithTimeout(d.ctx, lease.Timeout)
		err := d.cfg.Queue.Put(ctx, task.Work{Kind: task.WorkPush, ID: n.ID, Payload: encodeNotification(n)}, d.cfg.Holder, d.cfg.Lease)
		cancel()
		if err != nil {
			d.cfg.Logger.Warn("push: the notification could not be persisted; it is delivered from memory only",
				"task_id", n.TaskID, "host", hostOf(n.URL), "error", err)
			n.ID = ""
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A persisted notification refused here stays in the queue, unheld: it
	// is claimed once its lease runs out (by this process or another).
	if err := d.admissibleLocked(n); err != nil {
		return err
	}
	d.enqueueLocked(n)
	return nil
}

// admissible reports whether Enqueue would accept a notification now.
func (d *Deliverer) admissible(n Notification) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.admissibleLocked(n)
}

func (d *Deliverer) admissibleLocked(n Notification) error {
	if d.closed {
		return ErrClosed
	}
	if d.pending >= d.cfg.QueueSize {
		d.stats.Dropped++
		// Log the 1st, 2nd, 4th, 8th... overflow: a flood must not become a log flood.
		if dropped := d.stats.Dropped; bits.OnesCount64(dropped) == 1 {
			d.cfg.Logger.Warn("push: delivery queue full; notification dropped",
				"task_id", n.TaskID, "host", hostOf(n.URL), "queue_size", d.cfg.QueueSize, "dropped_total", dropped)
		}
		return ErrQueueFull
	}
	return nil
}

// enqueueLocked queues n behind the notifications of its destination with a
// lower Seq.
func (d *Deliverer) enqueueLocked(n Notification) {
	key := destKey{n.TaskID, n.URL}
	ds := d.dests[key]
	if ds == nil {
		ds = &dest{key: key}
		d.dests[key] = ds
	}
	j := &job{d: ds, n: n, enqueued: time.Now(), host: hostOf(n.URL)}
	i := sort.Search(len(ds.queue), func(i int) bool { return ds.queue[i].n.Seq > n.Seq })
	ds.queue = append(ds.queue, nil)
	copy(ds.queue[i+1:], ds.queue[i:])
	ds.queue[i] = j
	d.pending++
	if n.ID != "" {
		d.held[n.ID] = j
	}
	if !ds.busy {
		d.dispatchLocked(ds)
	}
}

// dispatchLocked hands the destination's next notification to the workers.
func (d *Deliverer) dispatchLocked(ds *dest) {
	if len(ds.queue) == 0 {
		ds.busy = false
		delete(d.dests, ds.key)
		return
	}
	j := ds.queue[0]
	ds.queue[0] = nil
	ds.queue = ds.queue[1:]
	ds.busy = true
	d.startLocked(j)
}

// Stats returns a snapshot of the counters.
func (d *Deliverer) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Queued = d.pending
	s.RefusedByGuard = make(map[string]uint64, len(d.stats.RefusedByGuard))
	for k, v := range d.stats.RefusedByGuard {
		s.RefusedByGuard[k] = v
	}
	return s
}

// QueueStats is the number of notifications accepted and not yet finished, and
// the number the full queue refused so far.
func (d *Deliverer) QueueStats() (queued int, dropped uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pending, d.stats.Dropped
}

// Close stops accepting notifications and waits until every accepted one has
// its final outcome, or ctx is done. At ctx's end, in-flight attempts are
// canceled, the rest are abandoned with ErrClosed, and ctx's error is returned.
func (d *Deliverer) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		if d.pending == 0 {
			close(d.drained)
		}
	}
	d.mu.Unlock()
	var err error
	select {
	case <-d.drained:
	case <-ctx.Done():
		err = ctx.Err()
		d.abort()
		<-d.drained
	}
	d.cancel()
	if d.loopDone != nil {
		<-d.loopDone
	}
	d.stop()
	return err
}

// stop ends the workers once nothing is left to send.
func (d *Deliverer) stop() {
	d.stopOnce.Do(func() { close(d.ready) })
	d.wg.Wait()
}

// abort cancels in-flight attempts and fails everything still waiting.
func (d *Deliverer) abort() {
	d.mu.Lock()
	d.aborted = true
	d.cancel()
	var stopped []*job
	for j, t := range d.timers {
		if t.Stop() {
			delete(d.timers, j)
			stopped = append(stopped, j)
		}
	}
	stopped = append(stopped, d.parked...)
	d.parked = nil
	d.mu.Unlock()
	for _, j := range stopped {
		d.finish(j, Result{N: j.n, Attempts: j.attempts, Err: ErrClosed})
	}
}

func (d *Deliverer) work() {
	defer d.wg.Done()
	for j := range d.ready {
		d.mu.Lock()
		aborted := d.aborted
		d.mu.Unlock()
		if aborted || d.isLost(j) {
			d.land(j)
		}
		if aborted {
			d.finish(j, Result{N: j.n, Attempts: j.attempts, Err: ErrClosed})
			continue
		}
		if d.isLost(j) {
			d.handOver(j)
			continue
		}
		r, retry := d.attempt(j)
		d.land(j)
		r.Latency = time.Since(j.enqueued)
		if d.cfg.OnAttempt != nil {
			d.cfg.OnAttempt(r)
		}
		if d.cfg.Events != nil {
			ev := Event(r, false)
			ev.Time = time.Now()
			d.cfg.Events.Pushed(ev)
		}
		if retry && j.attempts < d.cfg.MaxAttempts && d.schedule(j, r.Status, r.Err) {
			continue
		}
		d.finish(j, r)
	}
}

// schedule arms a timer for j's next attempt; false when aborted.
func (d *Deliverer) schedule(j *job, status int, err error) bool {
	wait := d.backoff(j.attempts)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.aborted {
		return false
	}
	d.stats.Retried++
	d.cfg.Logger.Debug("push: delivery attempt failed; will retry",
		"task_id", j.n.TaskID, "host", hostOf(j.n.URL), "attempt", j.attempts, "status", status, "error", err, "wait", wait)
	d.timers[j] = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.timers[j]; !ok {
			return // abort took it
		}
		delete(d.timers, j)
		d.startLocked(j)
	})
	return true
}

// backoff is full jitter: uniform in [0, min(MaxBackoff, BaseBackoff*2^(n-1))].
func (d *Deliverer) backoff(attempts int) time.Duration {
	ceiling := d.cfg.MaxBackoff
	if shift := attempts - 1; shift < 30 {
		if b := d.cfg.BaseBackoff << shift; b > 0 && b < ceiling {
			ceiling = b
		}
	}
	return rand.N(ceiling + 1)
}

// finish records j's final outcome and moves its destination along: the
// next notification for it is dispatched only now, which is what keeps a
// destination's notifications in Seq order.
func (d *Deliverer) finish(j *job, r Result) {
	r.Latency = time.Since(j.enqueued)
	d.remove(j, r)
	var refused *RefusedError
	d.mu.Lock()
	if r.Delivered {
		d.stats.Delivered++
	} else {
		d.stats.Failed++
		if errors.As(r.Err, &refused) {
			d.stats.RefusedByGuard[refused.Reason]++
		}
	}
	d.mu.Unlock()
	if !r.Delivered {
		d.cfg.Logger.Warn("push: notification not delivered",
			"task_id", j.n.TaskID, "host", hostOf(j.n.URL), "attempts", r.Attempts,
			"status", r.Status, "reason", reasonOf(r), "error", r.Err)
	}
	if d.cfg.OnResult != nil {
		d.cfg.OnResult(r)
	}
	if d.cfg.Events != nil {
		ev := Event(r, true)
		ev.Time = time.Now()
		d.cfg.Events.Pushed(ev)
	}
	d.mu.Lock()
	abandoned := d.leaveLocked(j)
	d.mu.Unlock()
	d.abandon(abandoned)
}

// leaveLocked takes j out of the pending count and moves its destination
// along: its next notification is dispatched, or, after Abort, the rest of
// its queue is returned for abandon. The last one out once closed completes
// the drain.
func (d *Deliverer) leaveLocked(j *job) (abandoned []*job) {
	d.pending--
	if d.aborted {
		abandoned, j.d.queue = j.d.queue, nil
	}
	d.dispatchLocked(j.d)
	if d.closed && d.pending == 0 {
		close(d.drained) // pending cannot grow once closed, so this runs once
	}
	return abandoned
}

// abandon finishes notifications left undelivered by Abort.
func (d *Deliverer) abandon(js []*job) {
	for _, q := range js {
		d.finish(q, Result{N: q.n, Err: ErrClosed})
	}
}

// attempt makes one POST; retry reports whether a later attempt may succeed.
func (d *Deliverer) attempt(j *job) (r Result, retry bool) {
	j.attempts++
	r = Result{N: j.n, Attempts: j.attempts}
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.AttemptTimeout)
	defer cancel()
	if d.cfg.Tracer != nil {
		var span trace.Span
		ctx, span = d.startAttempt(ctx, j)
		defer func() { endAttempt(span, r) }()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.n.URL, bytes.NewReader(j.n.Body))
	if err != nil {
		r.Err = &RefusedError{Host: hostOf(j.n.URL), Reason: ReasonUnparseable}
		return r, false
	}
	ct := j.n.ContentType
	if ct == "" {
		ct = "application/json"
	}
	req.Header.Set("Content-Type", ct)
	for k, vs := range j.n.Header {
		// Every header value writ writes is printable ASCII: anything else is
		// a different string to different receivers. The adapters refuse such
		// a token when it is set; this catches one stored before that.
		for _, v := range vs {
			if !wire.HeaderValue(v) {
				r.Err = &RefusedError{Host: hostOf(j.n.URL), Reason: ReasonHeaderValue}
				return r, false
			}
		}
		req.Header[k] = vs
	}
	if !wire.HeaderValue(ct) {
		r.Err = &RefusedError{Host: hostOf(j.n.URL), Reason: ReasonHeaderValue}
		return r, false
	}
	if d.cfg.Tracer != nil {
		injectTrace(ctx, req.Header)
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		r.Err = redact(err, req.URL)
		return r, retryableErr(err) && d.ctx.Err() == nil
	}
	// Drain a little so the connection can be reused; the content is ignored.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	r.Status = resp.StatusCode
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		r.Delivered = true
		return r, false
	}
	r.Err = &StatusError{Code: resp.StatusCode}
	return r, resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
}

// retryableErr: timeouts and connection errors are; guard refusals, bad URLs,
// certificate failures and oversized responses are not.
func retryableErr(err error) bool {
	var refused *RefusedError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &refused), errors.As(err, &unknownCA), errors.As(err, &hostErr),
		errors.As(err, &invalid), errors.Is(err, ErrResponseTooLarge), errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// redact replaces the URL in a client error with scheme://host: the path and
// query of a callback may carry secrets, and errors end up in logs.
func redact(err error, u *url.URL) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: u.Scheme + "://" + u.Host, Err: ue.Err}
	}
	return err
}

// hostOf is the host:port of a callback URL, for logs.
func hostOf(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparseable)"
	}
	return u.Host
}

// reasonOf is a short, stable reason for a failed delivery, for logs and
// events: never the error text, which may quote the callback.
func reasonOf(r Result) string {
	var refused *RefusedError
	var status *StatusError
	var netErr net.Error
	switch {
	case r.Delivered:
		return ""
	case errors.As(r.Err, &refused):
		return "refused:" + refused.Reason
	case errors.As(r.Err, &status):
		return fmt.Sprintf("status_%d", status.Code)
	case errors.Is(r.Err, ErrClosed):
		return "closed"
	case errors.Is(r.Err, ErrResponseTooLarge):
		return "response_too_large"
	case errors.Is(r.Err, context.DeadlineExceeded), errors.As(r.Err, &netErr) && netErr.Timeout():
		return "timeout"
	case r.Err != nil:
		return "connection"
	}
	return "unknown"
}

// Event is r as observers see it: the receiver's host, never its URL, token
// or credentials, and a stable reason instead of the error. final marks a
// notification's final outcome. Its Time is left for the sink to stamp.
func Event(r Result, final bool) events.Push {
	e := events.Push{TaskID: r.N.TaskID, ContextID: r.N.ContextID, Host: hostOf(r.N.URL),
		Attempt: r.Attempts, Status: r.Status, Final: final, Delivered: r.Delivered, Reason: reasonOf(r), Latency: r.Latency}
	var refused *RefusedError
	if errors.As(r.Err, &refused) {
		e.Refused = refused.Reason
	}
	return e
}
