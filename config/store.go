package config

import (
	"fmt"
	"net"
	"time"
)

// Store kinds, as Store.Kind.
const (
	// StoreFile is the embedded durable store (one bbolt file): the default of
	// `writ serve`.
	StoreFile = "file"
	// StoreRedis is the store replicas share.
	StoreRedis = "redis"
	// StoreMemory keeps tasks in the process only (tests, the demo).
	StoreMemory = "memory"
)

// Defaults of the store section.
const (
	DefaultSweepInterval = 10 * time.Second
	DefaultCommitDelay   = 100 * time.Millisecond
	DefaultWorkLease     = 30 * time.Second
	// MaxBatchWindow bounds store.batch_window (the file store's own bound).
	MaxBatchWindow = 10 * time.Millisecond
)

// Store configures the lifecycle store: where task records, context owners,
// pending push deliveries and followed tasks are kept (docs/state.md).
// lifecycle.max_tasks, max_tasks_per_owner and ttl and push.max_configs_* bound
// every kind.
type Store struct {
	// Kind is file, redis or memory. Empty is the default of the command:
	// `writ serve` reads it as file; writ embedded in code (the demo) as memory.
	Kind string `yaml:"kind"`
	// Path is the file store's file (kind file). Empty picks the default path
	// when `writ serve` starts: /var/lib/writ/writ.db if that directory can be
	// created and written, else $XDG_STATE_HOME/writ/writ.db (~/.local/state when
	// unset), else ./writ-state/writ.db.
	Path string `yaml:"path" writ:"path"`
	// SweepInterval is how often the file store removes expired records from
	// disk (default 10s). Reads never return an expired record either way.
	SweepInterval time.Duration `yaml:"sweep_interval"`
	// CommitDelay bounds how long the file store keeps a change that need not
	// be durable at once (a non-terminal state, an artifact name) before it
	// commits it, when no durable write commits it sooner (default 100ms).
	CommitDelay time.Duration `yaml:"commit_delay"`
	// BatchWindow is how long the file store lets a commit that a request
	// waits for wait, from the first such write, for other requests' writes
	// to share its fsync, while the store is busy (writes arrived while its
	// last commit synced); an idle store commits at once. Unset: 1ms;
	// 0: never wait (a commit starts as soon as none is under way). At most
	// 10ms: it adds to a durable write's wait under load.
	BatchWindow *time.Duration `yaml:"batch_window"`
	// WorkLease is how long this process holds a push delivery or a followed
	// task without renewing its lease (default 30s). Leases are renewed, and
	// unheld work claimed, every third of it; a process that dies has its work
	// taken over once its leases run out.
	WorkLease time.Duration `yaml:"work_lease"`
	// Redis says how to reach Redis (kind redis).
	Redis *Redis `yaml:"redis"`
}

// Redis is how writ reaches the Redis its replicas share.
type Redis struct {
	// Addr is host:port (default 127.0.0.1:6379).
	Addr string `yaml:"addr"`
	// Username and Password authenticate: an ACL user, or Password alone for
	// requirepass. PasswordFile reads the password from a file instead (a
	// mounted secret), trailing newline trimmed.
	Username     string `yaml:"username"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file" writ:"path"`
	// DB is the database number (default 0).
	DB int `yaml:"db"`
	// TLS, when present (even empty), connects over TLS.
	TLS *RedisTLS `yaml:"tls"`
	// KeyPrefix starts every key (default "writ:"); writs with different
	// prefixes share nothing.
	KeyPrefix string `yaml:"key_prefix"`
	// DialTimeout, ReadTimeout and WriteTimeout bound each network step
	// (defaults 2s, 1s, 1s).
	DialTimeout  time.Duration `yaml:"dial_timeout"`
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// PoolSize is the number of connections kept (default 10 per CPU).
	PoolSize int `yaml:"pool_size"`
}

// RedisTLS configures TLS to Redis. The server's certificate is verified
// against the system roots, or CAFile's.
type RedisTLS struct {
	CAFile string `yaml:"ca_file" writ:"path"`
	// CertFile and KeyFile are a client certificate, for servers that ask.
	CertFile string `yaml:"cert_file" writ:"path"`
	KeyFile  string `yaml:"key_file" writ:"path"`
	// ServerName is the name the certificate must carry (default: addr's host).
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate: tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

func (s *Store) applyDefaults() {
	if s.SweepInterval == 0 {
		s.SweepInterval = DefaultSweepInterval
	}
	if s.CommitDelay == 0 {
		s.CommitDelay = DefaultCommitDelay
	}
	if s.WorkLease == 0 {
		s.WorkLease = DefaultWorkLease
	}
	if s.Kind == StoreRedis && s.Redis == nil {
		s.Redis = &Redis{}
	}
	if r := s.Redis; r != nil && r.Addr == "" {
		r.Addr = "127.0.0.1:6379"
	}
}

func (s *Store) validate(bad func(key, format string, args ...any)) {
	switch s.Kind {
	case "", StoreFile, StoreRedis, StoreMemory:
	default:
		bad("store.kind", "must be file, redis or memory, not %q", s.Kind)
	}
	if s.Path != "" && s.Kind != "" && s.Kind != StoreFile {
		bad("store.path", "only with kind file (kind is %s)", s.Kind)
	}
	if s.Redis != nil && s.Kind != StoreRedis {
		bad("store.redis", "only with kind redis (kind is %q)", s.Kind)
	}
	for key, d := range map[string]time.Duration{"store.sweep_interval": s.SweepInterval,
		"store.commit_delay": s.CommitDelay, "store.work_lease": s.WorkLease} {
		if d < 0 {
			bad(key, "must be positive")
		}
	}
	if w := s.BatchWindow; w != nil {
		if *w < 0 || *w > MaxBatchWindow {
			bad("store.batch_window", "%v: must be between 0 and %v (it adds to a durable write's wait)", *w, MaxBatchWindow)
		}
		if s.Kind != "" && s.Kind != StoreFile {
			bad("store.batch_window", "only with kind file (kind is %s)", s.Kind)
		}
	}
	if s.WorkLease > 0 && s.WorkLease < 300*time.Millisecond {
		bad("store.work_lease", "%v is too short to renew in time (at least 300ms)", s.WorkLease)
	}
	r := s.Redis
	if r == nil {
		return
	}
	if _, _, err := net.SplitHostPort(r.Addr); err != nil {
		bad("store.redis.addr", "%q is not host:port", r.Addr)
	}
	if r.Password != "" && r.PasswordFile != "" {
		bad("store.redis.password_file", "set password or password_file, not both")
	}
	if r.DB < 0 {
		bad("store.redis.db", "must be 0 or positive")
	}
	if r.PoolSize < 0 {
		bad("store.redis.pool_size", "must be 0 (default) or positive")
	}
	for key, d := range map[string]time.Duration{"store.redis.dial_timeout": r.DialTimeout,
		"store.redis.read_timeout": r.ReadTimeout, "store.redis.write_timeout": r.WriteTimeout} {
		if d < 0 {
			bad(key, "must be positive")
		}
	}
	if t := r.TLS; t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		bad("store.redis.tls", "cert_file and key_file go together")
	}
}

// FileBatchWindow is the file store's batch window as filestore.Options
// takes it: 0 for the default (unset), negative for none (0).
func (s *Store) FileBatchWindow() time.Duration {
	switch {
	case s.BatchWindow == nil:
		return 0
	case *s.BatchWindow == 0:
		return -1
	}
	return *s.BatchWindow
}

// String names the store for logs: its kind and where it is, never a secret.
func (s *Store) String() string {
	switch s.Kind {
	case StoreRedis:
		if s.Redis != nil {
			return fmt.Sprintf("redis at %s db %d", s.Redis.Addr, s.Redis.DB)
		}
		return "redis"
	case StoreFile:
		return "file at " + s.Path
	}
	return s.Kind
}
