package storebench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/writ-authz/writ/internal/redistest"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/redisstore"
	"github.com/writ-authz/writ/task/storetest"
)

// stores returns the three stores, each empty, and for Redis a counter of the
// commands the server processed.
func stores(b *testing.B) (map[string]task.Store, func() int64) {
	mem := task.NewMemoryStore(task.MemoryLimits{})
	file, err := filestore.Open(filepath.Join(b.TempDir(), "writ.db"), task.MemoryLimits{}, filestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { file.Close() })
	srv := redistest.Start(b)
	var writes atomic.Int64
	rs, err := redisstore.New(task.MemoryLimits{}, redisstore.Options{Addr: srv.Addr(),
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			return countingConn{c, &writes}, err
		}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	return map[string]task.Store{"memory": mem, "file": file, "redis": rs}, writes.Load
}

// countingConn counts the requests sent: go-redis writes each command (no
// pipelining here) in one Write, and waits for its reply, so each is a round
// trip.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(b)
}

var ids atomic.Int64

// allowPath is one new task's lifecycle as the request path records it: the
// lookup for the follow-up check, the creation the answer reveals, then the
// task running and succeeding.
func allowPath(b *testing.B, s task.Store) {
	ctx := context.Background()
	id := "bench-" + strconv.FormatInt(ids.Add(1), 10)
	ref := storetest.Ref(id)
	if _, _, err := s.Get(ctx, ref); err != nil {
		b.Fatal(err)
	}
	if err := s.Create(ctx, storetest.Record(id, task.Queued)); err != nil {
		b.Fatal(err)
	}
	for _, st := range []task.State{task.Running, task.Succeeded} {
		if _, _, err := s.Apply(ctx, ref, task.Event{Kind: task.EventStatus, State: st}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowPath: Get, Create, Apply(running), Apply(succeeded) per op,
// serially and from 16 concurrent requests (-cpu 2 × parallelism 8), for
// each store. Compare ns/op to memory's in the same run; redis-rtt/op counts
// the round trips to Redis.
func BenchmarkAllowPath(b *testing.B) {
	all, commands := stores(b)
	for _, name := range []string{"memory", "file", "redis"} {
		s := all[name]
		b.Run(name+"/serial", func(b *testing.B) {
			before := commands()
			for b.Loop() {
				allowPath(b, s)
			}
			if name == "redis" {
				b.ReportMetric(float64(commands()-before)/float64(b.N), "redis-rtt/op")
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.SetParallelism(8)
			before := commands()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					allowPath(b, s)
				}
			})
			if name == "redis" {
				b.ReportMetric(float64(commands()-before)/float64(b.N), "redis-rtt/op")
			}
		})
	}
}

// BenchmarkFollowUp: the follow-up of a known task — Get, then Apply — the
// most frequent allow path once tasks exist.
func BenchmarkFollowUp(b *testing.B) {
	all, commands := stores(b)
	ctx := context.Background()
	for _, name := range []string{"memory", "file", "redis"} {
		s := all[name]
		const n = 1000
		for i := range n {
			if err := s.Create(ctx, storetest.Record("f"+strconv.Itoa(i), task.Running)); err != nil {
				b.Fatal(err)
			}
		}
		evs := [2]task.Event{{Kind: task.EventStatus, State: task.AwaitingInput}, {Kind: task.EventStatus, State: task.Running}}
		b.Run(name, func(b *testing.B) {
			before := commands()
			i := 0
			for b.Loop() {
				ref := storetest.Ref("f" + strconv.Itoa(i%n))
				if _, _, err := s.Get(ctx, ref); err != nil {
					b.Fatal(err)
				}
				if _, _, err := s.Apply(ctx, ref, evs[(i/n)%2]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if name == "redis" {
				b.ReportMetric(float64(commands()-before)/float64(b.N), "redis-rtt/op")
			}
		})
	}
}

// sizingTasks is how many tasks the sizing benchmark stores.
const sizingTasks = 10_000

// sizingRecord is a typical record: owner, two-hop chain, a classification,
// two artifact names and one push config.
func sizingRecord(i int) task.Record {
	r := storetest.Record(fmt.Sprintf("task-%08d", i), task.Running)
	r.Task.Owner.AgentID = "planner-" + strconv.Itoa(i%50)
	r.Task.ContextID = fmt.Sprintf("ctx-%08d", i)
	r.Task.Artifacts = []string{"draft", "summary"}
	r.Push = []task.PushConfig{{ID: "p1", URL: "https://callbacks.example.com/notify/" + strconv.Itoa(i), Token: "0123456789abcdef"}}
	return r
}

func fill(b *testing.B, s task.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	const workers = 32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < sizingTasks; i += workers {
				if err := s.Create(ctx, sizingRecord(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkBytesPerTask stores 10k typical tasks in each durable store and
// reports the bytes each costs: the file's growth on disk, Redis's
// used_memory growth. (The work is done once; ns/op means nothing here.)
func BenchmarkBytesPerTask(b *testing.B) {
	b.Run("file", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "writ.db")
		s, err := filestore.Open(path, task.MemoryLimits{}, filestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		before := fileSize(b, path)
		fill(b, s)
		for b.Loop() {
		}
		b.ReportMetric(float64(fileSize(b, path)-before)/sizingTasks, "bytes/task")
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		s, err := redisstore.New(task.MemoryLimits{}, redisstore.Options{Addr: srv.Addr()})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
		defer admin.Close()
		used := func() int64 {
			info, err := admin.Info(context.Background(), "memory").Result()
			if err != nil {
				b.Fatal(err)
			}
			for line := range strings.Lines(info) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					return n
				}
			}
			return 0
		}
		// Warm up the scripts and the connection pool first.
		if err := s.Create(context.Background(), sizingRecord(-1)); err != nil {
			b.Fatal(err)
		}
		before := used()
		fill(b, s)
		for b.Loop() {
		}
		b.ReportMetric(float64(used()-before)/sizingTasks, "bytes/task")
	})
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}
