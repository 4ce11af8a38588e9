package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/writ-authz/writ/internal/redistest"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/redisstore"
	"github.com/writ-authz/writ/task/storetest"
)

// TestRetiredTwoReplicas: replicas share one retired-id set, laid out as the
// first write made it, whatever each was configured with: a task evicted
// through one, its tombstone rolled over, is refused to a claim through the
// other, and both report the set's capacity on record.
func TestRetiredTwoReplicas(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	a := newStore(t, srv, task.MemoryLimits{MaxTasks: 2, MaxPerOwner: 100, MaxTombstones: 1, RetiredCapacity: 5000}, redisstore.Options{})
	b := newStore(t, srv, task.MemoryLimits{MaxTasks: 2, MaxPerOwner: 100, MaxTombstones: 1, RetiredCapacity: 90000},
		redisstore.Options{KeyPrefix: a.KeyPrefix()})
	if err := a.Create(ctx, storetest.Owned("v", "victim", task.Succeeded)); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := b.Create(ctx, storetest.Owned(fmt.Sprintf("f%d", i), "flood", task.Running)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := a.Tombstone(ctx, storetest.Ref("v")); ok || !errors.Is(err, task.ErrRetired) {
		t.Fatalf("A's Tombstone(v) = %v %v, want ErrRetired", ok, err)
	}
	err := b.ClaimTask(ctx, storetest.Owned("v", "flood", task.Running))
	if !errors.Is(err, task.ErrRetired) {
		t.Fatalf("B's ClaimTask(v) = %v, want ErrRetired", err)
	}
	for _, s := range []*redisstore.Store{a, b} {
		if st, err := s.Stats(ctx); err != nil || st.RetiredCapacity != 5000 || st.Retired < 5 {
			t.Errorf("Stats = %+v %v, want the first replica's capacity 5000 and 5 ids", st, err)
		}
	}
}

// TestRetiredLuaMatchesGo: the scripts put an id where task.Retired.Locate
// says, so the set is one layout in every store.
func TestRetiredLuaMatchesGo(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	l := task.MemoryLimits{RetiredCapacity: 4000}
	s := newStore(t, srv, l, redisstore.Options{})
	layout, err := l.Retired()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	for i := range 50 {
		rec := storetest.Owned(fmt.Sprintf("t%d", i), "x", task.Running)
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		at := layout.Locate(task.RetiredTask, rec.Ref())
		block, err := rdb.HGet(ctx, s.KeyPrefix()+"retired", fmt.Sprint(at.Block)).Result()
		if err != nil || !at.In([]byte(block)) {
			t.Fatalf("t%d: block %d = %x %v; Go's bits %v are not all set", i, at.Block, block, err, at.Bits[:at.K])
		}
	}
}
