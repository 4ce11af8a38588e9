package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/redisstore"
)

// varLibDir is where `writ serve` keeps its file store by default.
const varLibDir = "/var/lib/writ"

// lifecycleStore is the lifecycle store a running writ uses, with what goes
// with it: the work queue (nil for memory: nothing to resume), readiness, and
// what shutdown closes.
type lifecycleStore struct {
	task.Store
	queue task.WorkQueue
	// ping reports whether the store can serve (nil: it always can).
	ping  func(context.Context) error
	close func() error
	// desc names it for logs (never a secret).
	desc string
}

// Close closes the store, if it holds anything to close.
func (s *lifecycleStore) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

// Defer implements task.Deferring: the store's own deferred writes when it
// defers (the file store: one commit wait per answer, its group commit),
// else writes durable as they return. Without it the embedded interface
// would hide the file store's Defer from the core, and every write of an
// answer would wait for its own commit.
func (s *lifecycleStore) Defer() task.Deferred { return task.Defer(s.Store) }

var (
	_ io.Closer      = (*lifecycleStore)(nil)
	_ task.Deferring = (*lifecycleStore)(nil)
)

// givenStore is a store WithStore gave: its own work queue and readiness
// when it has them, never closed by writ.
func givenStore(st task.Store) *lifecycleStore {
	s := &lifecycleStore{Store: st, desc: "given by the embedder"}
	if q, ok := st.(task.WorkQueue); ok {
		s.queue = q
	}
	if p, ok := st.(interface{ Ping(context.Context) error }); ok {
		s.ping = p.Ping
	}
	return s
}

// limitsOf is what bounds every kind of store: lifecycle.max_tasks,
// max_tasks_per_owner, ttl and retired_ids, push.max_configs_*, and the
// eviction report.
func limitsOf(cfg *config.Config, onEvict func(task.Eviction)) task.MemoryLimits {
	return task.MemoryLimits{MaxTasks: cfg.Lifecycle.MaxTasks, MaxPerOwner: cfg.Lifecycle.MaxTasksPerOwner,
		TTL: cfg.Lifecycle.TTL, MaxPushPerTask: cfg.Push.MaxConfigsPerTask,
		MaxPushPerOwner: cfg.Push.MaxConfigsPerOwner, OnEvict: onEvict,
		RetiredCapacity: cfg.Lifecycle.RetiredIDs.Capacity, RetiredFalsePositive: cfg.Lifecycle.RetiredIDs.FalsePositiveRate}
}

// openStore opens the store cfg.Store names. An empty kind is memory here:
// `writ serve` turns it into file before it starts; writ embedded in code
// (the demo) keeps memory unless it asks for more.
func openStore(cfg *config.Config, log *slog.Logger, sink events.Sink) (*lifecycleStore, error) {
	sc := cfg.Store
	l := limitsOf(cfg, evictionReporter(log, sink))
	switch sc.Kind {
	case config.StoreFile:
		path := sc.Path
		if path == "" {
			path = defaultStorePath(varLibDir, os.Getenv)
		}
		ensureSyncHeadroom(log)
		fs, err := filestore.Open(path, l, filestore.Options{SweepInterval: sc.SweepInterval, CommitDelay: sc.CommitDelay,
			BatchWindow: sc.FileBatchWindow()})
		if err != nil {
			return nil, fmt.Errorf("store (file %s): %w", path, err)
		}
		return &lifecycleStore{Store: fs, queue: fs, ping: fs.Ping, close: fs.Close, desc: "file at " + path}, nil
	case config.StoreRedis:
		o, err := redisOptions(sc.Redis)
		if err != nil {
			return nil, err
		}
		rs, err := redisstore.New(l, o)
		if err != nil {
			return nil, fmt.Errorf("store.redis: %w", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), o.DialTimeout+time.Second)
		defer cancel()
		if err := rs.Ping(ctx); err != nil {
			// Not fatal: requests that need the store are refused (503) and
			// writ is not ready until Redis answers; the client reconnects.
			log.Warn("the lifecycle store does not answer yet; writ is not ready until it does",
				"store", sc.String(), "error", err)
		}
		return &lifecycleStore{Store: rs, queue: rs, ping: rs.Ping, close: rs.Close, desc: sc.String()}, nil
	case config.StoreMemory, "":
		return &lifecycleStore{Store: task.NewMemoryStore(l), desc: "memory"}, nil
	}
	return nil, fmt.Errorf("store.kind: unknown kind %q", sc.Kind)
}

// ensureSyncHeadroom gives the process a second P when it has one
// (GOMAXPROCS=1: one CPU, or the one-CPU limit of a sidecar's container, which
// Go follows) and GOMAXPROCS is not set by hand. A file-store commit's
// fdatasync blocks its thread, and the thread keeps its P until the
// runtime's monitor hands it off — under load that can take milliseconds, so
// with one P every commit stalls every request: measured out of process on
// one CPU at 32 connections, 0.5k allowed sends a second with one P, 2.2k
// with two (docs/state.md). The second P runs requests while a commit syncs;
// it adds no CPU of its own.
func ensureSyncHeadroom(log *slog.Logger) {
	if runtime.GOMAXPROCS(0) >= 2 || os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(2)
	log.Info("GOMAXPROCS raised to 2: the file store's commits block a thread while they sync", "cpus", runtime.NumCPU())
}

// redisOptions maps the store.redis section onto the Redis store's options.
func redisOptions(r *config.Redis) (redisstore.Options, error) {
	if r == nil {
		r = &config.Redis{}
	}
	o := redisstore.Options{Addr: r.Addr, Username: r.Username, Password: r.Password, DB: r.DB,
		KeyPrefix: r.KeyPrefix, DialTimeout: r.DialTimeout, ReadTimeout: r.ReadTimeout,
		WriteTimeout: r.WriteTimeout, PoolSize: r.PoolSize}
	if o.DialTimeout <= 0 {
		o.DialTimeout = redisstore.DefaultDialTimeout
	}
	if r.PasswordFile != "" {
		raw, err := os.ReadFile(r.PasswordFile)
		if err != nil {
			return o, fmt.Errorf("store.redis.password_file: %w", err)
		}
		o.Password = strings.TrimRight(string(raw), "\r\n")
	}
	if t := r.TLS; t != nil {
		o.TLS, o.CAFile, o.CertFile, o.KeyFile = true, t.CAFile, t.CertFile, t.KeyFile
		o.ServerName, o.InsecureSkipVerify = t.ServerName, t.InsecureSkipVerify
	}
	return o, nil
}

// evictionReporter logs every eviction (a live task or context dropped to
// honour the store's bounds) and emits it as a task_evicted event, which the
// metrics and the decision log record.
func evictionReporter(log *slog.Logger, sink events.Sink) func(task.Eviction) {
	return func(e task.Eviction) {
		ev := events.Task{Time: time.Now(), Kind: events.TaskEvicted, Route: e.Ref.Agent, From: e.State, Reason: e.Reason}
		attrs := []any{"agent", e.Ref.Agent, "reason", e.Reason, "owner_tenant", e.Owner.Tenant,
			"owner_agent_id", e.Owner.AgentID, "owner_user_id", e.Owner.UserID}
		if e.Context {
			ev.ContextID = e.Ref.ID
			attrs = append(attrs, "context_id", e.Ref.ID)
			log.Warn("lifecycle store: a context's owner was evicted to honour the store's bounds", attrs...)
		} else {
			ev.TaskID = e.Ref.ID
			attrs = append(attrs, "task_id", e.Ref.ID, "state", e.State)
			log.Warn("lifecycle store: a task was evicted to honour the store's bounds", attrs...)
		}
		sink.TaskChanged(ev)
	}
}

// defaultStorePath is where `writ serve` keeps its file store when
// store.path is not set, the first of these that can be created and written:
//
//   - varLib/writ.db (/var/lib/writ): the place of a service's state, and
//     what the container image and the Kubernetes manifest mount;
//   - $XDG_STATE_HOME/writ/writ.db (~/.local/state/writ when unset): a
//     developer's writ run without privileges keeps its state per user,
//     outside the source tree, across runs;
//   - ./writ-state/writ.db: neither exists (no home directory).
func defaultStorePath(varLib string, getenv func(string) string) string {
	dirs := []string{varLib}
	state := getenv("XDG_STATE_HOME")
	if state == "" {
		if home := getenv("HOME"); home != "" {
			state = filepath.Join(home, ".local", "state")
		}
	}
	if state != "" && filepath.IsAbs(state) {
		dirs = append(dirs, filepath.Join(state, "writ"))
	}
	for _, d := range dirs {
		if writable(d) {
			return filepath.Join(d, "writ.db")
		}
	}
	return filepath.Join("writ-state", "writ.db")
}

// writable reports whether dir exists or can be created, and a file can be
// created in it.
func writable(dir string) bool {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	f, err := os.CreateTemp(dir, ".writ-probe-*")
	if err != nil {
		return false
	}
	f.Close()
	_ = os.Remove(f.Name())
	return true
}

// newHolder names this process in the work queue's leases: host, pid and a
// random part (a pid is reused across restarts and containers).
func newHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "writ"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
