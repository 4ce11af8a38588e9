// Package fleet is writ's part in the machinery a fleet of OPAs already
// runs: decisions and lifecycle lines shipped to a decision-log collector
// in OPA's format (decision_log.upload:) and a status document in OPA's shape, served on
// the admin listener and uploaded to a status service (status:)
// (docs/fleet.md).
//
// What is OPA's and what is writ's: the batching of decisions (gzip'd
// chunks of at most chunk_bytes), the buffer bounded in bytes that drops
// its oldest chunks when full (counted), the upload loop with its jittered
// delay, the retry that keeps a failed chunk, the erasure of masked
// members, and the status document with its upload on every change are
// OPA's own decision-log and status plugins (v1/plugins/logs,
// v1/plugins/status) under OPA's plugin manager and REST client: the code
// every OPA deployment reports with, so a pipeline built for OPA's uploads
// (an OPA-compatible collector, Fluent Bit or Vector behind an HTTP input,
// a fleet dashboard reading OPA status) takes writ's as they are. writ's
// part is what comes before: a bounded queue off the request path (a full
// queue drops and counts, never blocks), the event itself
// (decisionlog.OPAEvent: the bytes of the opa format's line, so the file
// and the upload say the same; a lifecycle line is decisionlog's
// OPATaskEvent or OPAPushEvent, the local line's own encoding under an id
// of its own), the mask list written as the plugin's mask
// policy (data.system.log.mask), and what the status says of writ's policy
// sets and parts, which the assembly reports (UpdatePolicies, UpdatePart).
package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/logging"
	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/plugins/status"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
)

// The services in the plugin manager's configuration.
const (
	collectorService = "collector"
	statusService    = "status"
)

// Options are what New builds the plugins of.
type Options struct {
	// Upload ships decisions to a collector (nil: none).
	Upload *config.DecisionUpload
	// Status uploads the status document (nil: served only).
	Status *config.Status
	// Labels are the configuration's labels; ID and Version are writ's
	// own (the instance, writ's version), added with app: writ.
	Labels      map[string]string
	ID, Version string
	Logger      *slog.Logger
}

// Plugins are OPA's plugin manager with the status plugin and, with
// Options.Upload, the decision-log plugin; an events sink for the
// decisions (and lifecycle lines) to ship.
type Plugins struct {
	mgr     *plugins.Manager
	logs    *logs.Plugin // nil without Options.Upload
	status  *status.Plugin
	metrics opametrics.Metrics
	log     *slog.Logger

	q chan item
	// lifecycle ships the lifecycle lines too (decision_log.upload.lifecycle).
	lifecycle bool
	done      chan struct{}
	closeMu   sync.Once
	closed    atomic.Bool

	queued, dropped, failed atomic.Uint64
	lastDropLog             atomic.Int64
}

var _ events.Sink = (*Plugins)(nil)

// service is one service of the manager's configuration: url and, from a
// file, a bearer token (OPA's client reads the file at each request).
func service(url, tokenFile string) map[string]any {
	svc := map[string]any{"url": url}
	if tokenFile != "" {
		svc["credentials"] = map[string]any{"bearer": map[string]any{"token_path": tokenFile}}
	}
	return svc
}

// New builds the plugins of o; Start starts them.
func New(o Options) (*Plugins, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	labels := maps.Clone(o.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	// OPA's manager sets id (o.ID) and version (OPA's own); writ's is writ_version.
	labels["app"], labels["writ_version"] = "writ", o.Version
	services := map[string]any{}
	if o.Upload != nil {
		services[collectorService] = service(o.Upload.URL, o.Upload.TokenFile)
	}
	if o.Status != nil {
		services[statusService] = service(o.Status.URL, o.Status.TokenFile)
	}
	raw, err := json.Marshal(map[string]any{"services": services, "labels": labels})
	if err != nil {
		return nil, err
	}
	store := inmem.New()
	if o.Upload != nil {
		if err := storeMask(store, o.Upload.Mask); err != nil {
			return nil, err
		}
	}
	olog := &opaLogger{log: log.With("component", "fleet")}
	mgr, err := plugins.New(raw, o.ID, store, plugins.Logger(olog), plugins.ConsoleLogger(olog))
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	p := &Plugins{mgr: mgr, metrics: opametrics.New(), log: log, done: make(chan struct{})}

	// The status plugin: without status: it sends its updates to a
	// plugin that keeps none (quiet), not to a service (it would take the
	// collector's otherwise), and only answers Snapshot.
	sraw, err := json.Marshal(map[string]any{"plugin": quietName})
	if err != nil {
		return nil, err
	}
	svcs, list := []string(nil), []string{quietName}
	if o.Status != nil {
		if sraw, err = json.Marshal(map[string]any{"service": statusService, "partition_name": o.Status.PartitionName}); err != nil {
			return nil, err
		}
		svcs, list = []string{statusService}, nil
	}
	scfg, err := status.NewConfigBuilder().WithBytes(sraw).WithServices(svcs).WithPlugins(list).Parse()
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if o.Status == nil {
		mgr.Register(quietName, quiet{})
	}
	p.status = status.New(scfg, mgr).WithMetrics(p.metrics)
	mgr.Register(status.Name, p.status)

	if u := o.Upload; u != nil {
		lraw, err := json.Marshal(map[string]any{
			"service":  collectorService,
			"resource": u.Resource,
			"reporting": map[string]any{
				"buffer_type":             "size",
				"buffer_size_limit_bytes": u.BufferBytes,
				"upload_size_limit_bytes": u.ChunkBytes,
				"min_delay_seconds":       int64(u.MinDelay / time.Second),
				"max_delay_seconds":       int64(u.MaxDelay / time.Second),
			},
		})
		if err != nil {
			return nil, err
		}
		lcfg, err := logs.NewConfigBuilder().WithBytes(lraw).WithServices([]string{collectorService}).Parse()
		if err != nil {
			return nil, fmt.Errorf("decision_log.upload: %w", err)
		}
		p.logs = logs.New(lcfg, mgr).WithMetrics(p.metrics)
		mgr.Register(logs.Name, p.logs)
		p.q = make(chan item, u.Queue)
		p.lifecycle = u.ShipsLifecycle()
	}
	return p, nil
}

// Start starts the plugins (and the upload queue's worker).
func (p *Plugins) Start(ctx context.Context) error {
	if err := p.mgr.Start(ctx); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if p.q == nil {
		close(p.done)
		return nil
	}
	go p.work(context.WithoutCancel(ctx))
	return nil
}

// Close stops taking decisions, hands the queued ones to the decision-log
// plugin, and stops the plugins: with a deadline on ctx the decision-log
// plugin flushes what it holds first, and the status plugin sends its last
// update.
func (p *Plugins) Close(ctx context.Context) error {
	p.closeMu.Do(func() {
		p.closed.Store(true)
		if p.q != nil {
			close(p.q)
		}
	})
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("decision_log.upload: the queue was not drained: %w", ctx.Err())
	}
	p.mgr.Stop(ctx)
	return nil
}

// quietName names quiet among the manager's plugins.
const quietName = "writ_status_unsent"

// quiet is the status plugin's destination without status: (its Logger):
// updates are kept by the status plugin for Snapshot and sent nowhere.
type quiet struct{}

func (quiet) Start(context.Context) error                        { return nil }
func (quiet) Stop(context.Context)                               {}
func (quiet) Reconfigure(context.Context, any)                   {}
func (quiet) Log(context.Context, *status.UpdateRequestV1) error { return nil }

// opaLogger is OPA's logging.Logger over writ's slog logger: the plugins'
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
	maps.Copy(m, l.fields)
	maps.Copy(m, f)
	return &opaLogger{log: l.log, fields: m}
}

func (*opaLogger) GetLevel() logging.Level { return logging.Debug }
func (*opaLogger) SetLevel(logging.Level)  {}
