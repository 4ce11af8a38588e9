package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/writ-authz/writ/internal/redistest"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/redisstore"
	"github.com/writ-authz/writ/task/storetest"
)

var prefixes atomic.Int64

// newStore returns a store on srv under a prefix of its own, so that the
// suite's tests share one server but no keys.
func newStore(t testing.TB, srv *redistest.Server, l task.MemoryLimits, o redisstore.Options) *redisstore.Store {
	t.Helper()
	o.Addr = srv.Addr()
	if o.KeyPrefix == "" {
		o.KeyPrefix = fmt.Sprintf("test%d:", prefixes.Add(1))
	}
	s, err := redisstore.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Suite{RealClock: true, New: func(t *testing.T, l task.MemoryLimits) task.Store {
		return newStore(t, srv, l, redisstore.Options{})
	}}.Run(t)
}

func TestWorkContract(t *testing.T) {
	srv := redistest.Start(t)
	storetest.WorkSuite{RealClock: true, New: func(t *testing.T, l task.WorkLimits) task.WorkQueue {
		return newStore(t, srv, task.MemoryLimits{}, redisstore.Options{Work: l})
	}}.Run(t)
}
