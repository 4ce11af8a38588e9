package filestore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/writ-authz/writ/task"
)

func owned(id, owner string) task.Record {
	return task.Record{Agent: "a", Task: task.Task{ID: id, State: task.Running, Owner: task.Owner{Tenant: "t", AgentID: owner}}}
}

// TestRetiredSurvivesRestart: the retired-id set is in the file. A task
// evicted (its tombstone rolled over) and a context evicted before a restart
// are still refused after it; the set keeps the layout it was made with when
// the store is opened with another size; a file made before the set (no
// layout in it) has its tasks, tombstones and contexts entered when it is
// opened, so none of them can become unknown.
func TestRetiredSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "writ.db")
	l := task.MemoryLimits{MaxTasks: 2, MaxPerOwner: 100, MaxContexts: 1, MaxTombstones: 1, RetiredCapacity: 10_000}
	s, err := Open(path, l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []task.Record{owned("v", "victim"), owned("f0", "flood"), owned("f1", "flood"), owned("f2", "flood")} {
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	victim := task.Owner{Tenant: "t", AgentID: "victim"}
	for _, id := range []string{"c1", "c2"} {
		if _, err := s.ClaimContext(ctx, task.Ref{Agent: "a", ID: id}, victim); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l.RetiredCapacity = 500_000 // a later config: the file keeps its set
	s, err = Open(path, l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Tombstone(ctx, task.Ref{Agent: "a", ID: "v"}); ok || !errors.Is(err, task.ErrRetired) {
		t.Errorf("Tombstone(v) after a restart = %v %v, want ErrRetired", ok, err)
	}
	if err := s.ClaimTask(ctx, owned("v", "flood")); !errors.Is(err, task.ErrRetired) {
		t.Errorf("ClaimTask(v) after a restart = %v, want ErrRetired", err)
	}
	if _, err := s.ClaimContext(ctx, task.Ref{Agent: "a", ID: "c1"}, task.Owner{Tenant: "t", AgentID: "flood"}); !errors.Is(err, task.ErrRetired) {
		t.Errorf("ClaimContext(c1) after a restart = %v, want ErrRetired", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.RetiredCapacity != 10_000 {
		t.Errorf("Stats = %+v %v, want the capacity the file was made with", st, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A file from before the set: the layout and the set removed.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bMeta).Delete(kRetired); err != nil {
			return err
		}
		return tx.DeleteBucket(bRetired)
	})
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	s, err = Open(path, l, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// f2 is held and c2 owned: once evicted, neither can be claimed again.
	for i := range 3 {
		if err := s.Create(ctx, owned(fmt.Sprint("g", i), "flood")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ClaimContext(ctx, task.Ref{Agent: "a", ID: "c3"}, victim); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimTask(ctx, owned("f2", "victim")); !errors.Is(err, task.ErrRetired) {
		t.Errorf("ClaimTask(f2), held when the set was made = %v, want ErrRetired", err)
	}
	if _, err := s.ClaimContext(ctx, task.Ref{Agent: "a", ID: "c2"}, victim); !errors.Is(err, task.ErrRetired) {
		t.Errorf("ClaimContext(c2), held when the set was made = %v, want ErrRetired", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.RetiredCapacity != 500_000 {
		t.Errorf("Stats = %+v %v, want the capacity the new set was made with", st, err)
	}
}
