package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/storetest"
)

// smallFS mounts a tmpfs of size on a temporary directory (root only: skipped
// elsewhere outside CI) and unmounts it at cleanup.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI runs as root and must mount a tmpfs for the disk tests: %v %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func remount(t *testing.T, dir, mode string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+mode, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v %s", mode, dir, err, out)
	}
}

// TestReadOnlyDirectory: Open on a read-only file system fails with
// ErrUnavailable, and works once it is writable again.
func TestReadOnlyDirectory(t *testing.T) {
	dir := smallFS(t, "4m")
	remount(t, dir, "ro")
	path := filepath.Join(dir, "state", "writ.db")
	if _, err := filestore.Open(path, task.MemoryLimits{}, filestore.Options{}); !errors.Is(err, task.ErrUnavailable) {
		t.Fatalf("Open on a read-only directory: %v, want ErrUnavailable", err)
	}
	remount(t, dir, "rw")
	s := open(t, path, task.MemoryLimits{}, filestore.Options{})
	if err := s.Create(context.Background(), storetest.Record("t1", task.Queued)); err != nil {
		t.Fatal(err)
	}
}

// TestFullDisk: writes on a full file system fail with ErrUnavailable, what
// was written stays readable, and writes work again once there is room.
func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := smallFS(t, "2m")
	path := filepath.Join(dir, "writ.db")
	s := open(t, path, task.MemoryLimits{}, filestore.Options{})
	if err := s.Create(ctx, storetest.Record("before", task.Queued)); err != nil {
		t.Fatal(err)
	}
	// Fill the file system.
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			break
		}
	}
	filler.Close()
	// bbolt reuses free pages, so some writes may still fit: write until one
	// cannot.
	big := strings.Repeat("x", 2000)
	var werr error
	written := 0
	for i := range 2000 {
		r := storetest.Record(fmt.Sprint("t", i), task.Queued)
		r.Task.Chain = []string{big, big, big}
		if werr = s.Create(ctx, r); werr != nil {
			break
		}
		written = i + 1
	}
	if !errors.Is(werr, task.ErrUnavailable) {
		t.Fatalf("writes on a full disk: %v, want ErrUnavailable", werr)
	}
	if _, ok, err := s.Get(ctx, storetest.Ref("before")); !ok || err != nil {
		t.Fatalf("Get on a full disk: %v %v", ok, err)
	}
	if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	// Room again: the same store recovers by itself.
	if err := s.Create(ctx, storetest.Record("after", task.Queued)); err != nil {
		t.Fatalf("Create once there is room: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, task.MemoryLimits{}, filestore.Options{})
	ids := []string{"before", "after"}
	if written > 0 {
		ids = append(ids, fmt.Sprint("t", written-1))
	}
	for _, id := range ids {
		if _, ok, err := s.Get(ctx, storetest.Ref(id)); !ok || err != nil {
			t.Errorf("%s after reopen: %v %v", id, ok, err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Tasks != written+2 {
		t.Errorf("Stats %+v %v, want %d tasks", st, err, written+2)
	}
}
