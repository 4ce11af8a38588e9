package filestore_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/storetest"
)

// onDisk opens a copy of the store's file as it is on disk now (what a
// kill -9 would leave: bbolt writes pages only when it commits) and returns
// the record of ref there.
func onDisk(t *testing.T, s *filestore.Store, ref task.Ref) (task.Record, bool) {
	t.Helper()
	src, err := os.Open(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cp := filepath.Join(t.TempDir(), "copy.db")
	dst, err := os.Create(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	c, err := filestore.Open(cp, task.MemoryLimits{}, filestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, ok, err := c.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return r, ok
}

// TestLazyWrites: a non-terminal state change and artifact names return
// before they are committed and are read back at once; they reach the disk
// with the next write that matters, or after CommitDelay. A terminal state,
// a creation and a push config are on disk when their call returns.
func TestLazyWrites(t *testing.T) {
	ctx := context.Background()
	s := open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{CommitDelay: time.Hour})
	ref := storetest.Ref("t1")
	if err := s.Create(ctx, storetest.Record("t1", task.Queued)); err != nil {
		t.Fatal(err)
	}
	if r, ok := onDisk(t, s, ref); !ok || r.Task.State != task.Queued {
		t.Fatalf("a created task is durable when Create returns: %+v %v", r, ok)
	}
	_, next, err := s.Apply(ctx, ref, task.Event{Kind: task.EventArtifact, State: task.Running, Artifact: &task.ArtifactRef{Name: "report"}})
	if err != nil || next.Task.State != task.Running {
		t.Fatal(next, err)
	}
	if r := mustGet(t, s, ref); r.Task.State != task.Running || !slices.Contains(r.Task.Artifacts, "report") {
		t.Fatalf("a lazy write is read back at once: %+v", r)
	}
	if r, _ := onDisk(t, s, ref); r.Task.State != task.Queued || slices.Contains(r.Task.Artifacts, "report") {
		t.Fatalf("the lazy write is on disk already (CommitDelay is an hour): %+v", r)
	}
	// The next write that matters commits it too.
	if _, err := s.SetPush(ctx, storetest.Ref("t1"), task.PushConfig{URL: "https://cb.example"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := onDisk(t, s, ref); r.Task.State != task.Running || !slices.Contains(r.Task.Artifacts, "report") || len(r.Push) != 1 {
		t.Fatalf("after a durable write: %+v", r)
	}
	// A terminal state is durable at once.
	if _, _, err := s.Apply(ctx, ref, task.Event{Kind: task.EventStatus, State: task.Succeeded}); err != nil {
		t.Fatal(err)
	}
	if r, _ := onDisk(t, s, ref); r.Task.State != task.Succeeded {
		t.Fatalf("a terminal state is durable when Apply returns: %+v", r)
	}

	// With a short delay, a lazy write alone reaches the disk by itself.
	s2 := open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{CommitDelay: 20 * time.Millisecond})
	if err := s2.Create(ctx, storetest.Record("t2", task.Queued)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s2.Apply(ctx, storetest.Ref("t2"), task.Event{Kind: task.EventStatus, State: task.AwaitingInput}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, _ := onDisk(t, s2, storetest.Ref("t2")); r.Task.State == task.AwaitingInput {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lazy write never reached the disk")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Close commits what is pending.
	if _, _, err := s2.Apply(ctx, storetest.Ref("t2"), task.Event{Kind: task.EventStatus, State: task.Running}); err != nil {
		t.Fatal(err)
	}
	path := s2.Path()
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, path, task.MemoryLimits{}, filestore.Options{})
	if r := mustGet(t, s3, storetest.Ref("t2")); r.Task.State != task.Running {
		t.Fatalf("a lazy write is lost by Close: %+v", r)
	}
	if err := s3.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	s3.Close()
	if err := s3.Ping(ctx); !errors.Is(err, task.ErrUnavailable) {
		t.Fatalf("Ping after Close: %v, want ErrUnavailable", err)
	}
}
