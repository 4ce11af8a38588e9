package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/redistest"
)

// storeUnavailable: writ's answer when the lifecycle store failed — 503,
// JSON-RPC -32603 with the reason UNAVAILABLE (fail closed).
func storeUnavailable(st int, body []byte, err error) bool {
	return err == nil && st == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"code":-32603`)) &&
		bytes.Contains(body, []byte("UNAVAILABLE"))
}

// storeTraffic sends allowed and denied requests until stopped, and counts
// each kind of answer; an answer that is none of completed, the store's 503
// or the outsider's denial fails the test.
type storeTraffic struct {
	ok, unavailable, denied atomic.Int64
	stop                    func()
}

func (w *fwWrit) storeTraffic(t *testing.T) *storeTraffic {
	ctx, cancel := context.WithCancel(context.Background())
	s := &storeTraffic{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; ctx.Err() == nil; k++ {
				tok := w.token
				if k%4 == 3 {
					tok = w.outsider
				}
				st, body, err := w.send(ctx, tok, nil)
				switch {
				case ctx.Err() != nil:
					return
				case tok == w.outsider && deniedTenant(st, body, err):
					s.denied.Add(1)
				case tok == w.token && completed(st, body, err):
					s.ok.Add(1)
				case tok == w.token && storeUnavailable(st, body, err):
					s.unavailable.Add(1)
				default:
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%d %v %.300s", st, err, body))
					mu.Unlock()
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	s.stop = func() {
		cancel()
		wg.Wait()
		for _, b := range bad {
			t.Errorf("an answer that is neither the agent's, the store's 503 nor the policy's denial: %s", b)
		}
	}
	return s
}

// phase waits until the traffic shows n more answers of the counter.
func phase(t *testing.T, what string, c *atomic.Int64, n int64) {
	t.Helper()
	from := c.Load()
	waitUntil(t, what, 30*time.Second, func() bool { return c.Load() >= from+n })
}

// TestFaultFileStoreFullAndReadOnly: the file store on a small tmpfs that
// fills up, then is remounted read-only, with traffic running. While the
// store cannot write, a send is answered 503 UNAVAILABLE (fail closed: never
// a task writ could not record), denials are unaffected (the policy needs no
// store), /readyz stays up; once there is room (or the mount is writable
// again) sends complete with no restart, and the goroutines come back.
func TestFaultFileStoreFullAndReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the store")
	}
	mnt := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	w := startFaultWrit(t, fwOptions{store: fmt.Sprintf("store: {kind: file, path: '%s'}\n", filepath.Join(mnt, "writ.db"))})
	before := w.idleGoroutines(t)
	tr := w.storeTraffic(t)
	phase(t, "sends before the fault", &tr.ok, 20)

	// The disk fills up.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	_ = f.Close()
	phase(t, "sends refused 503 with the disk full", &tr.unavailable, 5)
	phase(t, "denials with the disk full", &tr.denied, 5)
	if code, _, err := w.Get("/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("/readyz with the disk full: %d %v", code, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	phase(t, "sends once there is room again", &tr.ok, 20)

	// The mount turns read-only: its own subtest, reported as skipped where
	// the kernel refuses to remount a file system with a file open for writing.
	t.Run("read-only", func(t *testing.T) {
		if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
			t.Skipf("remount,ro refused (%v %s)", err, bytes.TrimSpace(out))
		}
		phase(t, "sends refused 503 on a read-only store", &tr.unavailable, 5)
		phase(t, "denials on a read-only store", &tr.denied, 5)
		if out, err := exec.Command("mount", "-o", "remount,rw", mnt).CombinedOutput(); err != nil {
			t.Fatalf("remount,rw: %v %s", err, out)
		}
		phase(t, "sends once the store is writable again", &tr.ok, 20)
	})
	tr.stop()
	t.Logf("answers: %d completed, %d refused 503 while the store could not write, %d denied", tr.ok.Load(), tr.unavailable.Load(), tr.denied.Load())
	w.settled(t, before)
}

// TestFaultRedisStopped: the Redis store's server stopped with traffic
// running, then started again. While it is down, sends are answered 503
// UNAVAILABLE and /readyz says not ready; denials are unaffected; once it is
// back, sends complete with no restart of writ, and the goroutines come back.
// (TestReplicasOnRedis covers two replicas sharing the recovered state.)
func TestFaultRedisStopped(t *testing.T) {
	srv := redistest.Start(t)
	w := startFaultWrit(t, fwOptions{store: fmt.Sprintf("store: {kind: redis, redis: {addr: '%s', key_prefix: 'fault:'}}\n", srv.Addr())})
	before := w.idleGoroutines(t)
	tr := w.storeTraffic(t)
	phase(t, "sends before the fault", &tr.ok, 20)
	srv.Stop()
	phase(t, "sends refused 503 with Redis stopped", &tr.unavailable, 5)
	phase(t, "denials with Redis stopped", &tr.denied, 5)
	if code, body, err := w.Get("/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with Redis stopped: %d %v %s", code, err, body)
	}
	srv.Restart()
	phase(t, "sends once Redis is back", &tr.ok, 20)
	waitUntil(t, "/readyz once Redis is back", 30*time.Second, func() bool {
		code, _, err := w.Get("/readyz")
		return err == nil && code == http.StatusOK
	})
	tr.stop()
	t.Logf("answers: %d completed, %d refused 503 while Redis was down, %d denied", tr.ok.Load(), tr.unavailable.Load(), tr.denied.Load())
	w.settled(t, before)
}
