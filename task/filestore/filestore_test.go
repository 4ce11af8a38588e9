package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/storetest"
)

func open(t testing.TB, path string, l task.MemoryLimits, o filestore.Options) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(path, l, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "state", "writ.db") }

func TestContract(t *testing.T) {
	storetest.Suite{New: func(t *testing.T, l task.MemoryLimits) task.Store {
		return open(t, tempPath(t), l, filestore.Options{})
	}}.Run(t)
}

// TestContractDeferred: the store contract holds through a Batch too (its
// writes return before their commit, and every read sees them at once).
func TestContractDeferred(t *testing.T) {
	storetest.Suite{New: func(t *testing.T, l task.MemoryLimits) task.Store {
		return open(t, tempPath(t), l, filestore.Options{}).Defer()
	}}.Run(t)
}

func TestWorkContract(t *testing.T) {
	storetest.WorkSuite{New: func(t *testing.T, l task.WorkLimits) task.WorkQueue {
		return open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{Work: l})
	}}.Run(t)
}

// TestConcurrentWriters: many goroutines writing at once (their writes share
// commits) leave indexes and counters that agree with the records.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s := open(t, tempPath(t), task.MemoryLimits{MaxTasks: 300, MaxPerOwner: 60}, filestore.Options{})
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := s.Create(ctx, storetest.Owned(id, fmt.Sprint("o", w%3), task.Queued)); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					if _, _, err := s.Apply(ctx, storetest.Ref(id), task.Event{Kind: task.EventStatus, State: task.Succeeded}); err != nil && !errors.Is(err, task.ErrNotFound) {
						t.Error(err)
					}
				}
				if _, _, err := s.Get(ctx, storetest.Ref(id)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, byState := 0, map[task.State]int{}
	for w := range workers {
		for i := range each {
			if r, ok, _ := s.Get(ctx, storetest.Ref(fmt.Sprintf("w%d-%d", w, i))); ok {
				held++
				byState[r.Task.State]++
			}
		}
	}
	if st.Tasks != held || held > 180 || st.ByState[task.Queued] != byState[task.Queued] || st.ByState[task.Succeeded] != byState[task.Succeeded] {
		t.Errorf("Stats %+v; records held %d %v (3 owners × 60 at most)", st, held, byState)
	}
	if int(st.Evicted) != workers*each-held {
		t.Errorf("Evicted %d, want %d", st.Evicted, workers*each-held)
	}
}
