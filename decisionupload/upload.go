// Package decisionupload ships writ's decisions to a decision-log
// collector in OPA's format (decision_log.upload:,
// docs/fleet.md#decision-logs-upstream).
//
// What is OPA's and what is writ's: the batching (events gzip'd into chunks
// of at most chunk_bytes), the buffer bounded in bytes that drops the
// oldest chunks when full (counted), the upload loop with its jittered
// delay, the retry that keeps a failed chunk for the next upload, the POST
// of each chunk (Content-Encoding: gzip) and the erasure of masked members
// are OPA's own decision-log plugin (v1/plugins/logs) under its plugin
// manager and REST client: the same code every OPA deployment ships its
// logs with, so a pipeline built for OPA's uploads (an OPA-compatible
// collector, Fluent Bit or Vector behind an HTTP input) takes writ's as
// they are. writ's part is what comes before: a bounded queue off the
// request path (a full queue drops and counts, never blocks), the event
// itself (decisionlog.OPAEvent: the bytes of the opa format's line, so the
// file and the upload say the same), and the mask list written as the
// plugin's mask policy (data.system.log.mask).
package decisionupload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
)

// service names the collector in the plugin manager's configuration.
const service = "collector"

// The plugin's counters Stats reads (OPA's names, as metrics.All gives
// them, with its "counter_" prefix).
const (
	counterUploaded    = "counter_decision_logs_chunks_uploaded"
	counterFailed      = "counter_decision_logs_chunks_upload_failed"
	counterBufferDrops = "counter_decision_logs_dropped_buffer_size_limit_bytes_exceeded"
)

// Uploader is an events sink that ships every decision to the collector.
type Uploader struct {
	mgr     *plugins.Manager
	plugin  *logs.Plugin
	metrics opametrics.Metrics
	log     *slog.Logger

	q       chan events.Decision
	done    chan struct{}
	closeMu sync.Once
	closed  atomic.Bool

	queued, dropped, failed atomic.Uint64
	lastDropLog             atomic.Int64
}

var _ events.Sink = (*Uploader)(nil)

// New builds the uploader of cfg; Start starts it.
func New(cfg *config.DecisionUpload, log *slog.Logger) (*Uploader, error) {
	if log == nil {
		log = slog.Default()
	}
	svc := map[string]any{"url": cfg.URL}
	if cfg.TokenFile != "" {
		svc["credentials"] = map[string]any{"bearer": map[string]any{"token_path": cfg.TokenFile}}
	}
	raw, err := json.Marshal(map[string]any{
		"services": map[string]any{service: svc},
		"labels":   map[string]string{"app": "writ"},
	})
	if err != nil {
		return nil, err
	}
	store := inmem.New()
	if err := storeMask(store, cfg.Mask); err != nil {
		return nil, err
	}
	olog := &opaLogger{log: log.With("component", "decision_log.upload")}
	mgr, err := plugins.New(raw, "writ", store, plugins.Logger(olog), plugins.ConsoleLogger(olog))
	if err != nil {
		return nil, fmt.Errorf("decision_log.upload: %w", err)
	}
	minS, maxS := int64(cfg.MinDelay/time.Second), int64(cfg.MaxDelay/time.Second)
	lraw, err := json.Marshal(map[string]any{
		"service":  service,
		"resource": cfg.Resource,
		"reporting": map[string]any{
			"buffer_type":             "size",
			"buffer_size_limit_bytes": cfg.BufferBytes,
			"upload_size_limit_bytes": cfg.ChunkBytes,
			"min_delay_seconds":       minS,
			"max_delay_seconds":       maxS,
		},
	})
	if err != nil {
		return nil, err
	}
	lcfg, err := logs.NewConfigBuilder().WithBytes(lraw).WithServices(mgr.Services()).Parse()
	if err != nil {
		return nil, fmt.Errorf("decision_log.upload: %w", err)
	}
	m := opametrics.New()
	p := logs.New(lcfg, mgr).WithMetrics(m)
	mgr.Register(logs.Name, p)
	return &Uploader{mgr: mgr, plugin: p, metrics: m, log: log, q: make(chan events.Decision, cfg.Queue), done: make(chan struct{})}, nil
}

// storeMask writes the mask list as the plugin's mask policy: each pointer
// one element of data.system.log.mask, which the plugin erases from every
// event (and lists in its "erased").
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

// Start starts the plugin's upload loop and the queue's worker.
func (u *Uploader) Start(ctx context.Context) error {
	if err := u.mgr.Start(ctx); err != nil {
		return fmt.Errorf("decision_log.upload: %w", err)
	}
	go u.work()
	return nil
}

// work hands each queued decision to the plugin until the queue closes.
func (u *Uploader) work() {
	defer close(u.done)
	ctx := context.Background()
	for d := range u.q {
		info, err := eventInfo(&d)
		if err == nil {
			err = u.plugin.Log(ctx, info)
		}
		if err != nil {
			u.failed.Add(1)
			u.log.Error("a decision could not be handed to the upload; it is not shipped", "decision_id", d.ID, "error", err)
		}
	}
}

// Decided implements events.Sink: the decision is queued, or dropped and
// counted when the queue is full.
func (u *Uploader) Decided(d events.Decision) {
	if u.closed.Load() {
		return
	}
	select {
	case u.q <- d:
		u.queued.Add(1)
	default:
		n := u.dropped.Add(1)
		// One line a second at most: the count is in Stats and the metrics.
		if now := time.Now().Unix(); u.lastDropLog.Swap(now) != now {
			u.log.Error("decision upload queue full; decisions dropped (not shipped; the local log has them)", "dropped_total", n)
		}
	}
}

// Served implements events.Sink (nothing to ship).
func (*Uploader) Served(events.Request) {}

// TaskChanged implements events.Sink (nothing to ship).
func (*Uploader) TaskChanged(events.Task) {}

// Pushed implements events.Sink (nothing to ship).
func (*Uploader) Pushed(events.Push) {}

// Close stops taking decisions, hands the queued ones to the plugin, and
// stops it: with a deadline on ctx the plugin flushes what it holds first.
func (u *Uploader) Close(ctx context.Context) error {
	u.closeMu.Do(func() {
		u.closed.Store(true)
		close(u.q)
	})
	select {
	case <-u.done:
	case <-ctx.Done():
		return fmt.Errorf("decision_log.upload: the queue was not drained: %w", ctx.Err())
	}
	u.mgr.Stop(ctx)
	return nil
}

// Stats are the upload's counts.
type Stats struct {
	// Queued and Dropped count the decisions taken into the queue and
	// dropped because it was full; Failed those the plugin could not take.
	Queued, Dropped, Failed uint64
	// ChunksUploaded and ChunksFailed count the plugin's uploads;
	// BufferDrops the times it dropped chunks from a full buffer.
	ChunksUploaded, ChunksFailed, BufferDrops uint64
	// Buffered is the gzip'd bytes waiting for an upload.
	Buffered int64
}

// Stats reads the counts.
func (u *Uploader) Stats() Stats {
	st := Stats{Queued: u.queued.Load(), Dropped: u.dropped.Load(), Failed: u.failed.Load()}
	all := u.metrics.All()
	count := func(name string) uint64 { n, _ := all[name].(uint64); return n }
	st.ChunksUploaded, st.ChunksFailed, st.BufferDrops = count(counterUploaded), count(counterFailed), count(counterBufferDrops)
	_, st.Buffered = u.plugin.BufferSize()
	return st
}

// UploadTally implements metrics' source of the upload's counts.
func (u *Uploader) UploadTally() metrics.UploadTally {
	st := u.Stats()
	return metrics.UploadTally{ChunksUploaded: st.ChunksUploaded, ChunksFailed: st.ChunksFailed,
		QueueDropped: st.Dropped, BufferDrops: st.BufferDrops, Failed: st.Failed, Buffered: st.Buffered}
}

// eventInfo is d as the plugin takes it: the fields of its opa-format line.
func eventInfo(d *events.Decision) (*server.Info, error) {
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
	if err := json.Unmarshal(decisionlog.OPAEvent(d), &ev); err != nil {
		return nil, err
	}
	info := &server.Info{DecisionID: ev.DecisionID, Timestamp: ev.Timestamp, Path: ev.Path,
		Input: &ev.Input, Results: &ev.Result, Revision: ev.Revision, Custom: ev.Custom}
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

// opaLogger is OPA's logging.Logger over writ's slog logger: the plugin's
// own lines (a failed upload, dropped chunks) reach writ's log.
type opaLogger struct {
	log    *slog.Logger
	fields map[string]any
}

func (l *opaLogger) at(level slog.Level, format string, a []any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]any, 0, 2*len(l.fields))
	for k, v := range l.fields {
		attrs = append(attrs, k, v)
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, a...), attrs...)
}

func (l *opaLogger) Debug(f string, a ...any) { l.at(slog.LevelDebug, f, a) }
func (l *opaLogger) Info(f string, a ...any)  { l.at(slog.LevelDebug, f, a) } // OPA's info is chatty: writ's debug
func (l *opaLogger) Warn(f string, a ...any)  { l.at(slog.LevelWarn, f, a) }
func (l *opaLogger) Error(f string, a ...any) { l.at(slog.LevelError, f, a) }

func (l *opaLogger) WithFields(f map[string]any) logging.Logger {
	m := make(map[string]any, len(l.fields)+len(f))
	for k, v := range l.fields {
		m[k] = v
	}
	for k, v := range f {
		m[k] = v
	}
	return &opaLogger{log: l.log, fields: m}
}

func (*opaLogger) GetLevel() logging.Level { return logging.Debug }
func (*opaLogger) SetLevel(logging.Level)  {}
