package filestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/storetest"
)

// TestReopen: everything a store held is there after Close and Open, and its
// bounds and counters carry on where they were.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := tempPath(t)
	clock := storetest.NewClock()
	var mu sync.Mutex
	var evicted []task.Eviction
	l := task.MemoryLimits{MaxTasks: 6, MaxPerOwner: 3, Now: clock.Now, OnEvict: func(e task.Eviction) {
		mu.Lock()
		evicted = append(evicted, e)
		mu.Unlock()
	}}
	s, err := filestore.Open(path, l, filestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // noisy0 is evicted by noisy3
		if err := s.Create(ctx, storetest.Owned(fmt.Sprint("noisy", i), "noisy", task.Queued)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	rec := storetest.Record("t1", task.Queued)
	if err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, storetest.Ref("t1"), task.Event{Kind: task.EventStatus, State: task.Running}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Apply(ctx, storetest.Ref("t1"), task.Event{Kind: task.EventStatus, State: task.Queued}); !errors.Is(err, task.ErrIllegalTransition) {
		t.Fatal(err)
	}
	p, err := s.SetPush(ctx, storetest.Ref("t1"), task.PushConfig{URL: "https://cb.example", Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	alice := task.Owner{AgentID: "alice", Tenant: "acme"}
	if _, err := s.ClaimContext(ctx, task.Ref{Agent: storetest.Agent, ID: "ctx-9"}, alice); err != nil {
		t.Fatal(err)
	}
	// Leased for an hour, but the file lock says its holder is gone: reopened,
	// the item is claimable at once.
	if err := s.Put(ctx, task.Work{Kind: task.WorkPush, ID: "n1", Payload: []byte("due")}, "me", time.Hour); err != nil {
		t.Fatal(err)
	}
	want, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantRec := mustGet(t, s, storetest.Ref("t1"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, storetest.Ref("t1")); !errors.Is(err, task.ErrUnavailable) {
		t.Errorf("Get after Close: %v, want ErrUnavailable", err)
	}

	s = open(t, path, l, filestore.Options{})
	if got := mustGet(t, s, storetest.Ref("t1")); !equalRecords(got, wantRec) {
		t.Errorf("after reopen\n got %+v\nwant %+v", got, wantRec)
	} else if got.Push[0] != (task.PushConfig{ID: p.ID, URL: "https://cb.example", Token: "secret"}) {
		t.Errorf("push config %+v", got.Push[0])
	}
	if got, _ := s.Stats(ctx); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Stats after reopen %+v, want %+v", got, want)
	}
	if o, ok, err := s.Context(ctx, task.Ref{Agent: storetest.Agent, ID: "ctx-9"}); !ok || err != nil || o != alice {
		t.Errorf("context after reopen: %+v %v %v", o, ok, err)
	}
	if o, ok, _ := s.Tombstone(ctx, storetest.Ref("noisy0")); !ok || o.AgentID != "noisy" {
		t.Errorf("tombstone after reopen: %+v %v", o, ok)
	}
	if ws, err := s.Claim(ctx, task.WorkPush, "other", 5, time.Minute); err != nil || len(ws) != 1 || string(ws[0].Payload) != "due" {
		t.Errorf("work after reopen: %+v %v", ws, err)
	}
	// The per-owner bound carries on: noisy holds 3, so noisy4 evicts noisy1.
	if err := s.Create(ctx, storetest.Owned("noisy4", "noisy", task.Queued)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(evicted) != 2 || evicted[1].Ref != storetest.Ref("noisy1") {
		t.Errorf("evictions %+v, want noisy0 then noisy1", evicted)
	}
	mu.Unlock()
	// The global bound too: 4 held, q1 and q2 fit, q3 evicts the heaviest
	// owner's (noisy's) oldest.
	for _, id := range []string{"q1", "q2", "q3"} {
		if err := s.Create(ctx, storetest.Owned(id, "quiet", task.Queued)); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := s.Stats(ctx); st.Tasks != 6 || st.Evicted != 3 || st.Violations != 1 {
		t.Errorf("Stats %+v, want 6 tasks, 3 evicted, 1 violation", st)
	}
	if _, ok, _ := s.Tombstone(ctx, storetest.Ref("noisy2")); !ok {
		t.Error("noisy2 (noisy's oldest) was not the one evicted")
	}
}

func equalRecords(a, b task.Record) bool {
	return fmt.Sprintf("%+v", a) == fmt.Sprintf("%+v", b) && a.Created.Equal(b.Created) && a.Updated.Equal(b.Updated)
}

func mustGet(t *testing.T, s task.Store, ref task.Ref) task.Record {
	t.Helper()
	r, ok, err := s.Get(context.Background(), ref)
	if err != nil || !ok {
		t.Fatalf("Get(%v) = %v, %v", ref, ok, err)
	}
	return r
}

func TestLocked(t *testing.T) {
	path := tempPath(t)
	open(t, path, task.MemoryLimits{}, filestore.Options{})
	start := time.Now()
	_, err := filestore.Open(path, task.MemoryLimits{}, filestore.Options{LockTimeout: 200 * time.Millisecond})
	if !errors.Is(err, filestore.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Open: %v, want ErrLocked naming the file", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open waited %v", d)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v %v, want 0600", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v %v, want 0700", fi.Mode(), err)
	}
}

const childEnv = "WRIT_FILESTORE_CRASH_CHILD"

// TestMain lets the test binary run as the writer that TestKill9 kills.
func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild writes tasks, contexts, push configs and work items, printing
// each one's number once its call has returned, until it is killed.
func crashChild(path string) {
	ctx := context.Background()
	s, err := filestore.Open(path, task.MemoryLimits{}, filestore.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		id := "k" + strconv.Itoa(i)
		ref := storetest.Ref(id)
		err := s.Create(ctx, storetest.Owned(id, "o"+strconv.Itoa(i%7), task.Queued))
		if err == nil { // lazy: committed with the next write that matters
			_, _, err = s.Apply(ctx, ref, task.Event{Kind: task.EventArtifact, State: task.Running, Artifact: &task.ArtifactRef{Name: "a"}})
		}
		if err == nil {
			_, _, err = s.Apply(ctx, ref, task.Event{Kind: task.EventStatus, State: task.Succeeded})
		}
		if err == nil {
			_, err = s.SetPush(ctx, ref, task.PushConfig{ID: "p", URL: "https://cb/" + id})
		}
		if err == nil {
			_, err = s.ClaimContext(ctx, task.Ref{Agent: storetest.Agent, ID: "c" + id}, task.Owner{AgentID: id})
		}
		if err == nil {
			err = s.Put(ctx, task.Work{Kind: task.WorkPush, ID: id, Payload: []byte(id)}, "child", time.Hour)
		}
		if err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(1)
		}
		fmt.Fprintln(out, i)
		out.Flush()
	}
}

// TestKill9: a writer SIGKILLed mid-loop loses nothing it was told was
// written, and the file is held while it runs.
func TestKill9(t *testing.T) {
	ctx := context.Background()
	path := tempPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	last := -1
	for sc.Scan() {
		line := sc.Text()
		n, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("child: %s", line)
		}
		last = n
		if n == 20 {
			if _, err := filestore.Open(path, task.MemoryLimits{}, filestore.Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, filestore.ErrLocked) {
				t.Errorf("Open while the child holds the file: %v, want ErrLocked", err)
			}
		}
		if n == 150 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if last < 150 {
		t.Fatalf("child stopped after %d writes", last)
	}
	s := open(t, path, task.MemoryLimits{}, filestore.Options{})
	for i := 0; i <= last; i++ {
		id := "k" + strconv.Itoa(i)
		r, ok, err := s.Get(ctx, storetest.Ref(id))
		if err != nil || !ok || r.Task.State != task.Succeeded || len(r.Push) != 1 || r.Task.Owner.AgentID != "o"+strconv.Itoa(i%7) ||
			len(r.Task.Artifacts) != 1 {
			t.Fatalf("%s after kill -9: %+v %v %v", id, r, ok, err)
		}
		if o, ok, err := s.Context(ctx, task.Ref{Agent: storetest.Agent, ID: "c" + id}); err != nil || !ok || o.AgentID != id {
			t.Fatalf("context of %s after kill -9: %v %v", id, ok, err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The write in flight when the child died may or may not be there.
	if st.Tasks < last+1 || st.Tasks > last+2 || st.ByState[task.Succeeded]+st.ByState[task.Queued] != st.Tasks {
		t.Errorf("Stats after kill -9: %+v (last reported %d)", st, last)
	}
	n, err := s.Count(ctx, task.WorkPush)
	if err != nil || n < last+1 {
		t.Errorf("work items after kill -9: %d %v, want at least %d", n, err, last+1)
	}
}
