// Package redisstore is the lifecycle store that replicas share: task records,
// context owners, tombstones and the work queue in one Redis (standalone, or
// behind Sentinel through a proxy address; not Redis Cluster, whose scripts
// may not touch keys they do not declare).
//
// Atomicity: every write is one Lua script, so it runs alone on the server.
// A state change is a compare-and-set: the store reads the record (or uses
// the version it saw last), applies the event with task.ApplyEvent in Go — the
// one rule every store follows — and the script writes the result only if
// the record is still at that version, else it returns the current record and
// the store applies the event again to it. So two replicas observing one task
// never move it backwards and never both see the same change.
//
// Time is the Redis server's clock (TIME in the scripts), so replicas with
// skewed clocks agree on update order, expiry and leases; MemoryLimits.Now
// and WorkLimits.Now are ignored.
//
// Round trips: Get, Create, ClaimTask, Delete, ClaimContext, Context, Tombstone, Stats
// and every WorkQueue call are one each. Apply, SetPush and DeletePush are one
// when this instance saw the task's current version last (it keeps the last
// version of recently used tasks), else two.
package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/internal/recordenc"
)

// Defaults of Options.
const (
	DefaultAddr         = "127.0.0.1:6379"
	DefaultKeyPrefix    = "writ:"
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = time.Second
	DefaultWriteTimeout = time.Second
	// versionCache bounds the tasks whose last seen version is kept.
	versionCache = 8192
	// maxAttempts bounds the compare-and-set retries of one write.
	maxAttempts = 64
)

// Options say how to reach Redis. Zero values take the defaults.
type Options struct {
	// Addr is host:port (default 127.0.0.1:6379).
	Addr string
	// Username and Password authenticate (ACL user, or Password alone for
	// requirepass).
	Username, Password string
	// DB is the database number.
	DB int
	// TLS enables TLS. The server's certificate is verified against the
	// system roots, or CAFile's; ServerName defaults to Addr's host.
	TLS                bool
	CAFile             string
	ServerName         string
	InsecureSkipVerify bool
	// CertFile and KeyFile are a client certificate, for servers that ask.
	CertFile, KeyFile string
	// KeyPrefix starts every key of the store (default "writ:"); stores with
	// different prefixes share nothing.
	KeyPrefix string
	// DialTimeout, ReadTimeout and WriteTimeout bound each network step
	// (defaults 2s, 1s, 1s).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// PoolSize is the number of connections kept (default 10 per CPU).
	PoolSize int
	// Work bounds the work queue (its Now is ignored: leases use the
	// server's clock).
	Work task.WorkLimits
	// Dialer, when set, opens the connections (e.g. through a proxy, or to
	// count round trips in a benchmark); TLS, when enabled, runs over it.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

var (
	_ task.Store     = (*Store)(nil)
	_ task.WorkQueue = (*Store)(nil)
)

// Store is a task.Store and a task.WorkQueue on Redis.
type Store struct {
	rdb    *redis.Client
	limits task.MemoryLimits
	work   task.WorkLimits
	prefix string
	ttlMS  int64
	// retired is the layout of the retired-id set this instance asks for;
	// the one on record in Redis wins (scripts.go).
	retired task.Retired

	mu       sync.Mutex
	versions map[task.Ref]seen
}

// seen is the last version of a record this instance read or wrote.
type seen struct {
	rec task.Record
	ver int64
}

// New returns a store on the Redis o describes, bounded by l. It does not
// connect: the first call does, and Ping checks the connection. Connection
// loss fails each call at once with task.ErrUnavailable (the client does not
// retry a write whose effect it cannot know), and the client reconnects by
// itself when Redis is back.
func New(l task.MemoryLimits, o Options) (*Store, error) {
	ro, err := o.redisOptions()
	if err != nil {
		return nil, err
	}
	l = l.WithDefaults()
	retired, err := l.Retired()
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	prefix := o.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	return &Store{
		rdb: redis.NewClient(ro), limits: l, work: o.Work.WithDefaults(), prefix: prefix,
		ttlMS: max(l.TTL.Milliseconds(), 1), versions: map[task.Ref]seen{}, retired: retired,
	}, nil
}

func (o Options) redisOptions() (*redis.Options, error) {
	ro := &redis.Options{
		Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolSize: o.PoolSize, Dialer: o.Dialer,
		// Fail fast: a script whose reply was lost may have run, so it is
		// never sent twice; the caller answers 503 and the next call
		// reconnects.
		MaxRetries:               -1,
		DialerRetries:            1,
		DialerRetryTimeout:       time.Millisecond,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if ro.Addr == "" {
		ro.Addr = DefaultAddr
	}
	if ro.DialTimeout <= 0 {
		ro.DialTimeout = DefaultDialTimeout
	}
	if ro.ReadTimeout <= 0 {
		ro.ReadTimeout = DefaultReadTimeout
	}
	if ro.WriteTimeout <= 0 {
		ro.WriteTimeout = DefaultWriteTimeout
	}
	if o.TLS || o.CAFile != "" || o.CertFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName, InsecureSkipVerify: o.InsecureSkipVerify} //nolint:gosec // an operator's explicit choice (off by default), for test setups
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(ro.Addr)
			if err != nil {
				return nil, fmt.Errorf("redisstore: address %q: %w", ro.Addr, err)
			}
			cfg.ServerName = host
		}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("redisstore: CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("redisstore: CA file %s holds no PEM certificate", o.CAFile)
			}
			cfg.RootCAs = pool
		}
		if o.CertFile != "" || o.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("redisstore: client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		ro.TLSConfig = cfg
		if dial := o.Dialer; dial != nil { // go-redis applies TLS only on its own dialer
			ro.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(c, cfg)
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}
		}
	}
	return ro, nil
}

// Ping checks that Redis answers, for readiness: nil, or an error wrapping
// task.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	return unavailable(s.rdb.Ping(ctx).Err())
}

// Close closes the connections.
func (s *Store) Close() error { return s.rdb.Close() }

// KeyPrefix is the prefix of the store's keys.
func (s *Store) KeyPrefix() string { return s.prefix }

// Limits returns the limits in force, defaults filled in.
func (s *Store) Limits() task.MemoryLimits { return s.limits }

func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: redis: %w", task.ErrUnavailable, err)
}

func notFound(ref task.Ref) error {
	return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrNotFound)
}

// refKey is a ref's key: the agent's length, the agent, the id.
func refKey(r task.Ref) string {
	b := binary.AppendUvarint(make([]byte, 0, 2+len(r.Agent)+len(r.ID)), uint64(len(r.Agent)))
	return string(append(append(b, r.Agent...), r.ID...))
}

func parseRefKey(k string) (task.Ref, error) {
	n, w := binary.Uvarint([]byte(k))
	if w <= 0 || uint64(len(k)-w) < n {
		return task.Ref{}, unavailable(fmt.Errorf("corrupt key %q", k))
	}
	return task.Ref{Agent: k[w : w+int(n)], ID: k[w+int(n):]}, nil
}

// encode is the record as kept in field r: without its times, which are
// fields of their own set by the server's clock.
func encode(r task.Record) string {
	r.Created, r.Updated = time.Time{}, time.Time{}
	return string(recordenc.AppendRecord(make([]byte, 0, 256), &r))
}

func decode(blob string, created, updated any) (task.Record, error) {
	r, err := recordenc.Record([]byte(blob))
	if err != nil {
		return task.Record{}, unavailable(err)
	}
	c, err1 := micros(created)
	u, err2 := micros(updated)
	if err := errors.Join(err1, err2); err != nil {
		return task.Record{}, unavailable(err)
	}
	r.Created, r.Updated = c, u
	return r, nil
}

// num reads an integer reply, or a number the server formatted as a string.
func num(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(x, 64)
		return int64(f), err
	}
	return 0, fmt.Errorf("unexpected reply %T %v", v, v)
}

func micros(v any) (time.Time, error) {
	n, err := num(v)
	return time.UnixMicro(n), err
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// run runs a script; every failure is task.ErrUnavailable.
func (s *Store) run(ctx context.Context, sc *redis.Script, args ...any) ([]any, error) {
	res, err := sc.Run(ctx, s.rdb, nil, append([]any{s.prefix}, args...)...).Slice()
	if err != nil {
		return nil, unavailable(err)
	}
	return res, nil
}

// remember keeps rec at version ver as the last seen.
func (s *Store) remember(ref task.Ref, rec task.Record, ver int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.versions[ref]; !ok && len(s.versions) >= versionCache {
		for k := range s.versions { // drop any one
			delete(s.versions, k)
			break
		}
	}
	s.versions[ref] = seen{rec: rec, ver: ver}
}

func (s *Store) forget(ref task.Ref) {
	s.mu.Lock()
	delete(s.versions, ref)
	s.mu.Unlock()
}

func (s *Store) lastSeen(ref task.Ref) (seen, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.versions[ref]
	return v, ok
}

// clone is a copy of a stored record sharing no memory with it.
func (s *Store) clone(r task.Record) task.Record { return task.Stored(r, s.limits.MaxArtifacts) }

// fetch reads the record of ref and its version.
func (s *Store) fetch(ctx context.Context, ref task.Ref) (seen, bool, error) {
	vals, err := s.rdb.HMGet(ctx, s.prefix+"t:"+refKey(ref), "r", "v", "c", "u").Result()
	if err != nil {
		return seen{}, false, unavailable(err)
	}
	if vals[0] == nil || vals[1] == nil {
		s.forget(ref)
		return seen{}, false, nil
	}
	rec, err := decode(str(vals[0]), vals[2], vals[3])
	if err != nil {
		return seen{}, false, err
	}
	ver, err := num(vals[1])
	if err != nil {
		return seen{}, false, unavailable(err)
	}
	s.remember(ref, rec, ver)
	return seen{rec: rec, ver: ver}, true, nil
}

// Get implements task.Store: always read from Redis, one round trip.
func (s *Store) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	v, ok, err := s.fetch(ctx, ref)
	if err != nil || !ok {
		return task.Record{}, false, err
	}
	return s.clone(v.rec), true, nil
}

// evictions reads the evictions a script reported (5 values each) and
// reports them.
func (s *Store) evictions(vals []any) {
	for i := 0; i+5 <= len(vals); i += 5 {
		ref, err := parseRefKey(str(vals[i]))
		if err != nil {
			continue
		}
		owner, _ := recordenc.Owner([]byte(str(vals[i+1])))
		e := task.Eviction{Ref: ref, Owner: owner, State: task.State(str(vals[i+2])), Reason: str(vals[i+3]), Context: str(vals[i+4]) == "1"}
		if !e.Context {
			s.forget(ref)
		}
		if s.limits.OnEvict != nil {
			s.limits.OnEvict(e)
		}
	}
}

// layoutArgs are the retired-id set's blocks, k and capacity, as the scripts
// take them.
func (s *Store) layoutArgs() []any {
	return []any{s.retired.Blocks, s.retired.K, s.limits.RetiredCapacity}
}

// Create implements task.Store.
func (s *Store) Create(ctx context.Context, r task.Record) error { return s.create(ctx, r, 0) }

// ClaimTask implements task.Store.
func (s *Store) ClaimTask(ctx context.Context, r task.Record) error { return s.create(ctx, r, 1) }

func (s *Store) create(ctx context.Context, r task.Record, claim int) error {
	if err := task.ValidRecord(&r); err != nil {
		return err
	}
	ref := r.Ref()
	rec := task.Stored(r, s.limits.MaxArtifacts)
	var created int64
	if !rec.Created.IsZero() {
		created = rec.Created.UnixMicro()
	}
	l := s.limits
	args := append([]any{s.ttlMS, l.MaxTasks, l.MaxPerOwner, l.MaxTombstones,
		refKey(ref), encode(rec), string(rec.Task.State), task.OwnerKey(rec.Task.Owner),
		string(recordenc.AppendOwner(nil, rec.Task.Owner)), len(rec.Push), created}, s.layoutArgs()...)
	res, err := s.run(ctx, createScript, append(args, claim)...)
	if err != nil {
		return err
	}
	switch str(res[0]) {
	case "exists":
		return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrExists)
	case "retired":
		return fmt.Errorf("task %q on %q: %w", ref.ID, ref.Agent, task.ErrRetired)
	}
	if len(res) < 4 {
		return unavailable(fmt.Errorf("unexpected reply %v", res))
	}
	ver, err1 := num(res[1])
	c, err2 := micros(res[2])
	u, err3 := micros(res[3])
	if err := errors.Join(err1, err2, err3); err != nil {
		return unavailable(err)
	}
	rec.Created, rec.Updated = c, u
	s.evictions(res[4:])
	s.remember(ref, rec, ver)
	return nil
}

// change is one compare-and-set write: it computes the next record from the
// current one (or returns a domain error), and says whether the write counts
// as an update, is a violation, and which push bound applies.
type change func(cur task.Record) (next task.Record, violation bool, err error)

// put applies f to the current record of ref with compare-and-set, retrying
// on a concurrent change. A domain error f returns is trusted only when f saw
// the current version: otherwise the record is read again first.
func (s *Store) put(ctx context.Context, ref task.Ref, touch bool, maxPush int, f change) (prev, next task.Record, err error) {
	cur, ok := s.lastSeen(ref)
	fresh := false
	for range maxAttempts {
		if !ok {
			if cur, ok, err = s.fetch(ctx, ref); err != nil {
				return task.Record{}, task.Record{}, err
			}
			if !ok {
				return task.Record{}, task.Record{}, notFound(ref)
			}
			fresh = true
		}
		next, violation, ferr := f(s.clone(cur.rec))
		if ferr != nil {
			if fresh {
				return task.Record{}, task.Record{}, ferr
			}
			ok = false // decide on the current version
			continue
		}
		touchArg, violArg := 0, 0
		if touch {
			touchArg = 1
		}
		if violation {
			violArg = 1
		}
		res, err := s.run(ctx, putScript, s.ttlMS, refKey(ref), cur.ver, encode(next),
			string(next.Task.State), len(next.Push), violArg, touchArg, maxPush)
		if err != nil {
			return task.Record{}, task.Record{}, err
		}
		switch str(res[0]) {
		case "ok":
			ver, err1 := num(res[1])
			c, err2 := micros(res[2])
			u, err3 := micros(res[3])
			if err := errors.Join(err1, err2, err3); err != nil {
				return task.Record{}, task.Record{}, unavailable(err)
			}
			next.Created, next.Updated = c, u
			s.remember(ref, next, ver)
			return s.clone(cur.rec), s.clone(next), nil
		case "notfound":
			s.forget(ref)
			return task.Record{}, task.Record{}, notFound(ref)
		case "pushlimit":
			return task.Record{}, task.Record{}, fmt.Errorf("task %q: %w (%d per owner)", ref.ID, task.ErrPushLimit, s.limits.MaxPushPerOwner)
		case "conflict":
			rec, derr := decode(str(res[2]), res[3], res[4])
			ver, verr := num(res[1])
			if err := errors.Join(derr, verr); err != nil {
				return task.Record{}, task.Record{}, unavailable(err)
			}
			cur, ok, fresh = seen{rec: rec, ver: ver}, true, true
			s.remember(ref, rec, ver)
		default:
			return task.Record{}, task.Record{}, unavailable(fmt.Errorf("unexpected reply %v", res))
		}
	}
	return task.Record{}, task.Record{}, unavailable(fmt.Errorf("task %q: still contended after %d attempts", ref.ID, maxAttempts))
}

// Apply implements task.Store.
func (s *Store) Apply(ctx context.Context, ref task.Ref, ev task.Event) (prev, next task.Record, err error) {
	var terr error
	prev, next, err = s.put(ctx, ref, true, 0, func(cur task.Record) (task.Record, bool, error) {
		terr = task.ApplyEvent(&cur, ev, s.limits.MaxArtifacts)
		return cur, terr != nil, nil
	})
	if err != nil {
		return task.Record{}, task.Record{}, err
	}
	return prev, next, terr
}

// Delete implements task.Store.
func (s *Store) Delete(ctx context.Context, ref task.Ref) error {
	s.forget(ref)
	n, err := deleteScript.Run(ctx, s.rdb, nil, s.prefix, refKey(ref)).Int()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return notFound(ref)
	}
	return nil
}

func newPushID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "push-" + hex.EncodeToString(b[:])
}

// SetPush implements task.Store. Setting a config counts as an update.
func (s *Store) SetPush(ctx context.Context, ref task.Ref, p task.PushConfig) (task.PushConfig, error) {
	if p.ID == "" {
		p.ID = newPushID()
	}
	_, _, err := s.put(ctx, ref, true, s.limits.MaxPushPerOwner, func(cur task.Record) (task.Record, bool, error) {
		for i := range cur.Push {
			if cur.Push[i].ID == p.ID {
				cur.Push[i] = p
				return cur, false, nil
			}
		}
		if len(cur.Push) >= s.limits.MaxPushPerTask {
			return cur, false, fmt.Errorf("task %q: %w (%d per task)", ref.ID, task.ErrPushLimit, s.limits.MaxPushPerTask)
		}
		cur.Push = append(cur.Push, p)
		return cur, false, nil
	})
	if err != nil {
		return task.PushConfig{}, err
	}
	return p, nil
}

// DeletePush implements task.Store. Like the memory store, it does not count
// as an update of the task.
func (s *Store) DeletePush(ctx context.Context, ref task.Ref, cid string) error {
	_, _, err := s.put(ctx, ref, false, 0, func(cur task.Record) (task.Record, bool, error) {
		for i := range cur.Push {
			if cur.Push[i].ID == cid {
				cur.Push = append(cur.Push[:i:i], cur.Push[i+1:]...)
				return cur, false, nil
			}
		}
		return cur, false, fmt.Errorf("task %q config %q: %w", ref.ID, cid, task.ErrPushNotFound)
	})
	return err
}

// ClaimContext implements task.Store.
func (s *Store) ClaimContext(ctx context.Context, ref task.Ref, owner task.Owner) (task.Owner, error) {
	l := s.limits
	res, err := s.run(ctx, claimScript, append([]any{s.ttlMS, l.MaxContexts, l.MaxPerOwner, refKey(ref),
		task.OwnerKey(owner), string(recordenc.AppendOwner(nil, owner))}, s.layoutArgs()...)...)
	if err != nil {
		return task.Owner{}, err
	}
	if len(res) == 0 {
		return task.Owner{}, fmt.Errorf("context %q on %q: %w", ref.ID, ref.Agent, task.ErrRetired)
	}
	on, err := recordenc.Owner([]byte(str(res[0])))
	if err != nil {
		return task.Owner{}, unavailable(err)
	}
	s.evictions(res[1:])
	return on, nil
}

// Context implements task.Store.
func (s *Store) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	return s.forgotten(ctx, "c", "context", ref)
}

// Tombstone implements task.Store.
func (s *Store) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	return s.forgotten(ctx, "t", "task", ref)
}

// forgotten runs forgottenScript: the owner on record (a context's, or an
// evicted task's), else ErrRetired for an id the set holds. One round trip.
func (s *Store) forgotten(ctx context.Context, kind, what string, ref task.Ref) (task.Owner, bool, error) {
	res, err := s.run(ctx, forgottenScript, append([]any{kind, refKey(ref)}, s.layoutArgs()...)...)
	if err != nil {
		return task.Owner{}, false, err
	}
	switch {
	case len(res) == 0:
		return task.Owner{}, false, nil
	case str(res[0]) == "retired":
		return task.Owner{}, false, fmt.Errorf("%s %q on %q: %w", what, ref.ID, ref.Agent, task.ErrRetired)
	case len(res) == 2:
		o, err := recordenc.Owner([]byte(str(res[1])))
		if err != nil {
			return task.Owner{}, false, unavailable(err)
		}
		return o, true, nil
	}
	return task.Owner{}, false, unavailable(fmt.Errorf("unexpected reply %v", res))
}

// Stats implements task.Store. Index entries of expired records are removed
// (and counted as expired) first.
func (s *Store) Stats(ctx context.Context) (task.StoreStats, error) {
	res, err := s.run(ctx, statsScript, s.ttlMS, s.limits.RetiredCapacity)
	if err != nil {
		return task.StoreStats{}, err
	}
	if len(res) != len(task.States)+6 {
		return task.StoreStats{}, unavailable(fmt.Errorf("unexpected reply %v", res))
	}
	n := make([]int64, len(res))
	for i, v := range res {
		if n[i], err = num(v); err != nil {
			return task.StoreStats{}, unavailable(err)
		}
	}
	out := task.StoreStats{ByState: make(map[task.State]int, len(task.States))}
	for i, st := range task.States {
		out.ByState[st] = int(n[i])
		out.Tasks += int(n[i])
	}
	k := len(task.States)
	out.Contexts = int(n[k])
	out.Evicted, out.Expired, out.Violations = uint64(n[k+1]), uint64(n[k+2]), uint64(n[k+3])
	out.Retired, out.RetiredCapacity = uint64(n[k+4]), int(n[k+5])
	return out, nil
}
