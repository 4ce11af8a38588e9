package config

import (
	"strings"
	"testing"
	"time"
)

// TestStore: the store section's defaults, a full redis section, and each bad
// key refused by name.
func TestStore(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Store
	if s.Kind != "" || s.Path != "" || s.Redis != nil || s.SweepInterval != 10*time.Second ||
		s.CommitDelay != 100*time.Millisecond || s.WorkLease != 30*time.Second || s.BatchWindow != nil || s.FileBatchWindow() != 0 {
		t.Errorf("store defaults: %+v", s)
	}
	c, err = Parse([]byte(good + "store: {kind: file, path: /var/lib/writ/x.db, sweep_interval: 1m, commit_delay: 10ms, work_lease: 5s, batch_window: 2ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Store; s.Kind != StoreFile || s.Path != "/var/lib/writ/x.db" || s.SweepInterval != time.Minute ||
		s.CommitDelay != 10*time.Millisecond || s.WorkLease != 5*time.Second || s.FileBatchWindow() != 2*time.Millisecond || s.String() != "file at /var/lib/writ/x.db" {
		t.Errorf("file store: %+v", s)
	}
	c, err = Parse([]byte(good + `store:
  kind: redis
  redis:
    addr: redis.agents.svc:6380
    username: writ
    password: s3cret
    db: 2
    tls: {ca_file: /etc/redis/ca.pem, cert_file: /etc/redis/c.pem, key_file: /etc/redis/k.pem, server_name: redis.agents.svc}
    key_prefix: "sanctions:"
    dial_timeout: 3s
    read_timeout: 500ms
    write_timeout: 500ms
    pool_size: 20
`))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Store.Redis
	if r == nil || r.Addr != "redis.agents.svc:6380" || r.Username != "writ" || r.DB != 2 || r.TLS == nil ||
		r.TLS.ServerName != "redis.agents.svc" || r.KeyPrefix != "sanctions:" || r.ReadTimeout != 500*time.Millisecond || r.PoolSize != 20 {
		t.Errorf("redis: %+v", r)
	}
	if got := c.Store.String(); strings.Contains(got, "s3cret") || !strings.Contains(got, "redis.agents.svc:6380") {
		t.Errorf("String() = %q", got)
	}
	// batch_window 0 is none (negative for the file store), not the default.
	if c, err = Parse([]byte(good + "store: {batch_window: 0s}\n")); err != nil || c.Store.FileBatchWindow() >= 0 {
		t.Fatalf("batch_window 0: %v %v", c.Store.FileBatchWindow(), err)
	}
	// kind redis with no section: the defaults.
	c, err = Parse([]byte(good + "store: {kind: redis}\n"))
	if err != nil || c.Store.Redis == nil || c.Store.Redis.Addr != "127.0.0.1:6379" {
		t.Fatalf("kind redis alone: %+v %v", c.Store.Redis, err)
	}
	for key, section := range map[string]string{
		"store.kind":               "store: {kind: sqlite}",
		"store.path":               "store: {kind: memory, path: /tmp/x.db}",
		"store.redis: only":        "store: {kind: file, redis: {addr: 'x:1'}}",
		"store.sweep_interval":     "store: {sweep_interval: -1s}",
		"store.commit_delay":       "store: {commit_delay: -1s}",
		"store.batch_window: -1ms": "store: {batch_window: -1ms}",
		"store.batch_window: 11ms": "store: {batch_window: 11ms}",
		"store.batch_window: only": "store: {kind: memory, batch_window: 1ms}",
		"store.batch_window: only with kind file (kind is redis)": "store: {kind: redis, batch_window: 0s}",
		"store.work_lease: must":                                  "store: {work_lease: -1s}",
		"store.work_lease: 10ms":                                  "store: {work_lease: 10ms}",
		"store.redis.addr":                                        "store: {kind: redis, redis: {addr: redis}}",
		"store.redis.db":                                          "store: {kind: redis, redis: {db: -1}}",
		"store.redis.pool_size":                                   "store: {kind: redis, redis: {pool_size: -1}}",
		"store.redis.read_timeout":                                "store: {kind: redis, redis: {read_timeout: -1s}}",
		"store.redis.password_file":                               "store: {kind: redis, redis: {password: a, password_file: /b}}",
		"store.redis.tls":                                         "store: {kind: redis, redis: {tls: {cert_file: /c.pem}}}",
		"store.redis.sentinel: unknown key":                       "store: {kind: redis, redis: {sentinel: x}}",
		"store.redis.tls.insecure: unknown key (did you mean insecure_skip_verify?)": "store: {kind: redis, redis: {tls: {insecure: true}}}",
		"store.file_path: unknown key (did you mean path?)":                          "store: {file_path: /x}",
	} {
		_, err := Parse([]byte(good + section + "\n"))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v", key, err)
		}
	}
}
