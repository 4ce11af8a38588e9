package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage"

	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
)

// The decision-log plugin's counters Stats reads (OPA's names, as
// metrics.All gives them, with its "counter_" prefix).
const (
	counterUploaded    = "counter_decision_logs_chunks_uploaded"
	counterFailed      = "counter_decision_logs_chunks_upload_failed"
	counterBufferDrops = "counter_decision_logs_dropped_buffer_size_limit_bytes_exceeded"
)

// storeMask writes the mask list as the decision-log plugin's mask policy:
// each pointer one element of data.system.log.mask, which the plugin
// erases from every event (and lists in its "erased").
func storeMask(store storage.Store, mask []string) error {
	if len(mask) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("package system.log\n\n")
	for _, m := range mask {
		fmt.Fprintf(&b, "mask contains %s\n", strconv.Quote(m))
	}
	ctx := context.Background()
	return storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
		return store.UpsertPolicy(ctx, txn, "writ-upload-mask.rego", []byte(b.String()))
	})
}

// item is one event waiting in the upload's queue: a decision, or a
// lifecycle line (t or p).
type item struct {
	d events.Decision
	t *events.Task
	p *events.Push
}

// event is it as the OPA event shipped, and the id it ships under: a
// decision's own, a lifecycle line's fresh one.
func (it *item) event() (id string, raw []byte) {
	switch {
	case it.t != nil:
		id = newEventID()
		return id, decisionlog.OPATaskEvent(it.t, id)
	case it.p != nil:
		id = newEventID()
		return id, decisionlog.OPAPushEvent(it.p, id)
	}
	return it.d.ID, decisionlog.OPAEvent(&it.d)
}

// newEventID names a lifecycle event: random, like a decision's id (OPA's
// pipelines key on decision_id, so no two events may share one).
func newEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand's Read never fails (it panics rather)
	return hex.EncodeToString(b[:])
}

// work hands each queued event to the decision-log plugin until the queue
// closes.
func (p *Plugins) work(ctx context.Context) {
	defer close(p.done)
	for it := range p.q {
		id, raw := it.event()
		info, err := eventInfo(raw)
		if err == nil {
			err = p.logs.Log(ctx, info)
		}
		if err != nil {
			p.failed.Add(1)
			p.log.Error("an event could not be handed to the upload; it is not shipped", "decision_id", id, "error", err)
		}
	}
}

// enqueue queues it for the upload, or drops and counts it when the queue
// is full (never waits: the request path calls it).
func (p *Plugins) enqueue(it item) {
	if p.q == nil || p.closed.Load() {
		return
	}
	select {
	case p.q <- it:
		p.queued.Add(1)
	default:
		n := p.dropped.Add(1)
		// One line a second at most: the count is in Stats and the metrics.
		if now := time.Now().Unix(); p.lastDropLog.Swap(now) != now {
			p.log.Error("decision upload queue full; events dropped (not shipped; the local log has them)", "dropped_total", n)
		}
	}
}

// Decided implements events.Sink: with decision_log.upload the decision is
// queued, or dropped and counted when the queue is full.
func (p *Plugins) Decided(d events.Decision) { p.enqueue(item{d: d}) }

// Served implements events.Sink (nothing to ship).
func (*Plugins) Served(events.Request) {}

// TaskChanged implements events.Sink: with decision_log.upload (and its
// lifecycle on) the lifecycle line is queued like a decision.
func (p *Plugins) TaskChanged(t events.Task) {
	if p.lifecycle {
		p.enqueue(item{t: &t})
	}
}

// Pushed implements events.Sink: with decision_log.upload (and its
// lifecycle on) the push line is queued like a decision.
func (p *Plugins) Pushed(e events.Push) {
	if p.lifecycle {
		p.enqueue(item{p: &e})
	}
}

// Uploading reports whether decisions are shipped (decision_log.upload).
func (p *Plugins) Uploading() bool { return p.logs != nil }

// Stats are the upload's counts.
type Stats struct {
	// Queued and Dropped count the events (decisions and lifecycle lines)
	// taken into the queue and dropped because it was full; Failed those
	// the plugin could not take.
	Queued, Dropped, Failed uint64
	// ChunksUploaded and ChunksFailed count the plugin's uploads;
	// BufferDrops the times it dropped chunks from a full buffer.
	ChunksUploaded, ChunksFailed, BufferDrops uint64
	// Buffered is the gzip'd bytes waiting for an upload.
	Buffered int64
}

// Stats reads the upload's counts (zero without decision_log.upload).
func (p *Plugins) Stats() Stats {
	st := Stats{Queued: p.queued.Load(), Dropped: p.dropped.Load(), Failed: p.failed.Load()}
	all := p.metrics.All()
	count := func(name string) uint64 { n, _ := all[name].(uint64); return n }
	st.ChunksUploaded, st.ChunksFailed, st.BufferDrops = count(counterUploaded), count(counterFailed), count(counterBufferDrops)
	if p.logs != nil {
		_, st.Buffered = p.logs.BufferSize()
	}
	return st
}

// UploadTally implements metrics' source of the upload's counts.
func (p *Plugins) UploadTally() metrics.UploadTally {
	st := p.Stats()
	return metrics.UploadTally{ChunksUploaded: st.ChunksUploaded, ChunksFailed: st.ChunksFailed,
		QueueDropped: st.Dropped, BufferDrops: st.BufferDrops, Failed: st.Failed, Buffered: st.Buffered}
}

// eventInfo is an OPA event (decisionlog's encoding of a decision or a
// lifecycle line) as the decision-log plugin takes it.
func eventInfo(raw []byte) (*server.Info, error) {
	var ev struct {
		DecisionID string                               `json:"decision_id"`
		Timestamp  time.Time                            `json:"timestamp"`
		Path       string                               `json:"path"`
		Input      any                                  `json:"input"`
		Result     any                                  `json:"result"`
		Revision   string                               `json:"revision"`
		Bundles    map[string]struct{ Revision string } `json:"bundles"`
		Error      *struct{ Message string }            `json:"error"`
		Custom     map[string]any                       `json:"custom"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, err
	}
	info := &server.Info{DecisionID: ev.DecisionID, Timestamp: ev.Timestamp, Path: ev.Path,
		Input: &ev.Input, Revision: ev.Revision, Custom: ev.Custom}
	if ev.Result != nil { // a lifecycle event has none
		info.Results = &ev.Result
	}
	if len(ev.Bundles) > 0 {
		info.Bundles = map[string]server.BundleInfo{}
		for name, b := range ev.Bundles {
			info.Bundles[name] = server.BundleInfo{Revision: b.Revision}
		}
	}
	if ev.Error != nil {
		info.Error = errors.New(ev.Error.Message)
	}
	return info, nil
}
