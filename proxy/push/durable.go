package push

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/lease"
)

// DefaultLease is how long a notification stays leased to a Deliverer that
// stops renewing it (DelivererConfig.Lease).
const DefaultLease = 30 * time.Second

// claimBatch bounds the notifications claimed in one call.
const claimBatch = 256

// newWorkID names one notification in the work queue: random, so that two
// notifications never share an item.
func newWorkID() string {
	var b [16]byte
	for i := 0; i < len(b); i += 8 {
		v := rand.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	return hex.EncodeToString(b[:])
}

// storedNotification is a notification as the work queue keeps it. Header
// holds the receiver's token and credentials, as the push config in the
// same store does.
type storedNotification struct {
	V           int         `json:"v"`
	TaskID      string      `json:"task_id"`
	ContextID   string      `json:"context_id,omitempty"`
	URL         string      `json:"url"`
	Header      http.Header `json:"header,omitempty"`
	ContentType string      `json:"content_type,omitempty"`
	Body        []byte      `json:"body"`
	Seq         uint64      `json:"seq"`
	Owner       string      `json:"owner,omitempty"`
	// Trace is the W3C trace context of the request that raised it.
	Trace map[string]string `json:"trace,omitempty"`
}

func encodeNotification(n Notification) []byte {
	raw, _ := json.Marshal(storedNotification{V: 1, TaskID: n.TaskID, ContextID: n.ContextID, URL: n.URL,
		Header: n.Header, ContentType: n.ContentType, Body: n.Body, Seq: n.Seq, Owner: n.Owner, Trace: n.Trace})
	return raw
}

var errUnknownPayload = errors.New("push: unknown work item payload")

func decodeNotification(w task.Work) (Notification, error) {
	var s storedNotification
	if err := json.Unmarshal(w.Payload, &s); err != nil {
		return Notification{}, err
	}
	if s.V != 1 {
		return Notification{}, errUnknownPayload
	}
	return Notification{TaskID: s.TaskID, ContextID: s.ContextID, URL: s.URL, Header: s.Header,
		ContentType: s.ContentType, Body: s.Body, Seq: s.Seq, ID: w.ID, Owner: s.Owner, Trace: s.Trace}, nil
}

// remove takes a finished notification out of the work queue, unless it was
// abandoned by Close (it stays, for whoever claims it next). A removal that
// fails is retried by the claim loop.
func (d *Deliverer) remove(j *job, r Result) {
	id := j.n.ID
	if id == "" || d.cfg.Queue == nil {
		return
	}
	d.mu.Lock()
	delete(d.held, id)
	d.mu.Unlock()
	if errors.Is(r.Err, ErrClosed) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.Timeout)
	defer cancel()
	err := d.cfg.Queue.Done(ctx, task.WorkPush, id, d.cfg.Holder)
	switch {
	case err == nil:
	case errors.Is(err, task.ErrNotHolder):
		// Another holder took it over while this one delivered it: it may
		// deliver it again (at least once, not exactly once, across a lost lease).
		d.cfg.Logger.Info("push: a notification was taken over before its outcome was recorded",
			"task_id", j.n.TaskID, "host", hostOf(j.n.URL))
	default:
		d.mu.Lock()
		d.undone[id] = true
		d.mu.Unlock()
		d.cfg.Logger.Warn("push: a finished notification could not be removed from the work queue; retrying",
			"task_id", j.n.TaskID, "error", err)
	}
}

func (d *Deliverer) isLost(j *job) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return j.lost
}

// handOver drops a notification another holder took over, with no outcome of
// its own (the new holder reports it), and moves its destination along.
func (d *Deliverer) handOver(j *job) {
	d.mu.Lock()
	d.stats.HandedOver++
	if j.n.ID != "" && d.held[j.n.ID] == j {
		delete(d.held, j.n.ID)
	}
	abandoned := d.leaveLocked(j)
	d.mu.Unlock()
	d.abandon(abandoned)
}

// claimLoop renews the leases this Deliverer holds and claims the
// notifications nobody holds, at once and then every third of the lease,
// until Close.
func (d *Deliverer) claimLoop() {
	defer close(d.loopDone)
	lease.Loop(d.ctx, d.cfg.Lease, func() {
		d.renew()
		d.retryDone()
		for d.claim() {
		}
	})
}

// renew extends the leases of the notifications this Deliverer holds; those
// another holder took over get no further attempt here.
func (d *Deliverer) renew() {
	d.mu.Lock()
	ids := slices.Collect(maps.Keys(d.held))
	d.mu.Unlock()
	lost, err := lease.Renew(d.ctx, d.cfg.Queue, task.WorkPush, d.cfg.Holder, ids, d.cfg.Lease)
	if err != nil {
		d.cfg.Logger.Warn("push: the leases of pending notifications could not be renewed", "held", len(ids), "error", err)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range lost {
		if j := d.held[id]; j != nil {
			j.lost = true
			delete(d.held, id)
		}
	}
}

// retryDone removes from the queue the finished notifications whose removal
// failed.
func (d *Deliverer) retryDone() {
	d.mu.Lock()
	ids := slices.Collect(maps.Keys(d.undone))
	d.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(d.ctx, lease.Timeout)
		err := d.cfg.Queue.Done(ctx, task.WorkPush, id, d.cfg.Holder)
		cancel()
		if err == nil || errors.Is(err, task.ErrNotHolder) {
			d.mu.Lock()
			delete(d.undone, id)
			d.mu.Unlock()
		}
	}
}

// claim takes up to one batch of the notifications nobody holds (as many as
// the memory queue has room for) and queues them; it reports whether it took
// a full batch (more may be waiting).
func (d *Deliverer) claim() bool {
	d.mu.Lock()
	room := min(d.cfg.QueueSize-d.pending, claimBatch)
	closed := d.closed
	d.mu.Unlock()
	if room <= 0 || closed {
		return false
	}
	ctx, cancel := context.WithTimeout(d.ctx, lease.Timeout)
	defer cancel()
	ws, err := d.cfg.Queue.Claim(ctx, task.WorkPush, d.cfg.Holder, room, d.cfg.Lease)
	if err != nil {
		if d.ctx.Err() == nil {
			d.cfg.Logger.Warn("push: pending notifications could not be claimed", "error", err)
		}
		return false
	}
	// Queued in Seq order, so that a destination's notifications of one
	// batch go out in order.
	type claimed struct {
		w   task.Work
		n   Notification
		err error
	}
	cs := make([]claimed, len(ws))
	for i, w := range ws {
		n, err := decodeNotification(w)
		cs[i] = claimed{w, n, err}
	}
	slices.SortStableFunc(cs, func(a, b claimed) int { return cmp.Compare(a.n.Seq, b.n.Seq) })
	for _, c := range cs {
		d.resume(ctx, c.w, c.n, c.err)
	}
	return len(ws) == room
}

// resume queues one claimed notification.
func (d *Deliverer) resume(ctx context.Context, w task.Work, n Notification, err error) {
	d.mu.Lock()
	if d.held[w.ID] != nil { // its lease ran out while queued here: ours again
		d.mu.Unlock()
		return
	}
	if d.undone[w.ID] || err != nil {
		delete(d.undone, w.ID)
		d.mu.Unlock()
		if err != nil {
			d.cfg.Logger.Error("push: a pending notification could not be read; dropped", "id", w.ID, "error", err)
		}
		if err := d.cfg.Queue.Done(ctx, task.WorkPush, w.ID, d.cfg.Holder); err != nil && !errors.Is(err, task.ErrNotHolder) {
			d.cfg.Logger.Warn("push: a dropped notification could not be removed from the work queue; it is claimed and dropped again", "id", w.ID, "error", err)
		}
		return
	}
	defer d.mu.Unlock()
	if d.closed || d.pending >= d.cfg.QueueSize {
		return // not held: claimed again once its lease runs out
	}
	d.stats.Resumed++
	d.enqueueLocked(n)
}
