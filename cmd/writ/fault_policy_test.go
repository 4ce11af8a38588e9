package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/writproc"
)

// TestFaultPolicyReplacedUnderLoad: with traffic running, the policy is
// broken three ways — a file that does not compile written into the watched
// directory, a test file that fails (a set that compiles but fails its own
// tests), and the whole directory swapped for a broken one then SIGHUP. Each
// reload is refused and logged, /v1/policy reports it, and the last good
// policy keeps serving: not one request fails or is decided differently (the
// allowed keep completing, the outsider keeps being denied
// TENANT_NOT_PERMITTED). A good directory put back is loaded on SIGHUP, and
// later good changes in it are picked up by the file watcher and on SIGHUP,
// with no restart.
func TestFaultPolicyReplacedUnderLoad(t *testing.T) {
	w := startFaultWrit(t, fwOptions{})
	good, err := w.Policy()
	if err != nil {
		t.Fatal(err)
	}
	before := w.idleGoroutines(t)
	stop := w.steady(t, 3)
	refused := func(what string, prevFailed uint64) uint64 {
		t.Helper()
		pi := w.policyWait(t, what, func(pi writproc.PolicyInfo) bool {
			_, f := reloads(pi)
			return f > prevFailed
		})
		if pi.Revision != good.Revision || pi.LastReload == nil || pi.LastReload.OK || pi.LastReload.Error == "" {
			t.Errorf("%s: /v1/policy %+v, want revision %s still serving and the refusal reported", what, pi, good.Revision)
		}
		_, f := reloads(pi)
		return f
	}
	time.Sleep(300 * time.Millisecond) // traffic on the good policy first
	failed := uint64(0)

	// badFile writes a file into the watched directory, checks that its reload
	// is refused, then removes it and waits for the good set to be back.
	badFile := func(what, name, rego, removed string) {
		t.Helper()
		path := filepath.Join(w.policies, name)
		if err := os.WriteFile(path, []byte(rego), 0o644); err != nil {
			t.Fatal(err)
		}
		failed = refused(what, failed)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		w.policyWait(t, removed, func(pi writproc.PolicyInfo) bool {
			return pi.LastReload != nil && pi.LastReload.OK && pi.Revision == good.Revision
		})
	}

	// 1. A file that does not compile, written into the watched directory.
	badFile("a file that does not compile", "broken.rego",
		"package writ.authz\n\ndeny contains d if {\n", "the broken file removed")

	// 2. A set that compiles but fails its own tests.
	badFile("a set whose own test fails", "zz_failing_test.rego",
		"package writ.authz_test\n\ntest_always_fails if {\n\tfalse\n}\n", "the failing test removed")

	// 3. The whole directory replaced by a broken one (no data.json, a rule
	// that does not compile), then SIGHUP.
	brokenDir := filepath.Join(w.dir, "policies-broken")
	writproc.CopyPolicies(t, brokenDir)
	if err := os.Remove(filepath.Join(brokenDir, "data.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(brokenDir, "decision.rego"), []byte("package writ.authz\n\ndecision := {"), 0o644); err != nil {
		t.Fatal(err)
	}
	aside := filepath.Join(w.dir, "policies-good")
	if err := os.Rename(w.policies, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(brokenDir, w.policies); err != nil {
		t.Fatal(err)
	}
	w.hup(t)
	_ = refused("the directory replaced by a broken one", failed)

	// A good directory back — a fresh copy, as a deploy writes one — on SIGHUP.
	if err := os.RemoveAll(w.policies); err != nil {
		t.Fatal(err)
	}
	writproc.CopyPolicies(t, w.policies, "127.0.0.1")
	w.hup(t)
	w.policyWait(t, "the good directory back", func(pi writproc.PolicyInfo) bool {
		return pi.LastReload != nil && pi.LastReload.OK && pi.Revision == good.Revision
	})
	if n := stop(); n == 0 {
		t.Fatal("no traffic ran")
	}
	if !w.logHas("policy reload refused; the last good policy keeps serving") {
		t.Error("the refusals are not in writ's log")
	}
	w.settled(t, before)

	// Later good changes: picked up by the file watcher, and on SIGHUP.
	data := filepath.Join(w.policies, "data.json")
	change := func(marker int) {
		raw, err := os.ReadFile(data)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		doc["fault_marker"] = marker
		raw, _ = json.Marshal(doc)
		if err := os.WriteFile(data, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The file watcher follows the directory that replaced the first one.
	quiet(t, w)
	change(1)
	w.policyWait(t, "a good change in the replacing directory, by the file watcher", func(pi writproc.PolicyInfo) bool {
		return pi.LastReload != nil && pi.LastReload.OK && pi.Revision != good.Revision
	})
	changed, err := w.Policy()
	if err != nil {
		t.Fatal(err)
	}
	change(2)
	w.hup(t)
	w.policyWait(t, "a good change on SIGHUP", func(pi writproc.PolicyInfo) bool {
		return pi.LastReload != nil && pi.LastReload.OK && pi.Revision != good.Revision && pi.Revision != changed.Revision
	})
	if st, body, err := w.send(t.Context(), w.outsider, nil); !deniedTenant(st, body, err) {
		t.Errorf("the new policy does not deny the outsider: %d %v %s", st, err, body)
	}
}

// quiet waits until no reload has run for two seconds.
func quiet(t *testing.T, w *fwWrit) {
	t.Helper()
	last, since := uint64(0), time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pi, err := w.Policy()
		if err != nil {
			t.Fatal(err)
		}
		ok, failed := reloads(pi)
		if ok+failed != last {
			last, since = ok+failed, time.Now()
		}
		if time.Since(since) > 2*time.Second {
			return
		}
	}
	t.Fatal("reloads did not stop")
}

// TestFaultSIGHUPStorm: a thousand SIGHUPs, one every two milliseconds (so a
// reload is always running and more are always arriving), with traffic running and the policy changed in the middle of the storm.
// writ does not crash, every request is answered as the policy says, the
// reloads are counted, the last change is the revision serving, and the
// goroutines come back to where they were.
func TestFaultSIGHUPStorm(t *testing.T) {
	w := startFaultWrit(t, fwOptions{})
	start, err := w.Policy()
	if err != nil {
		t.Fatal(err)
	}
	before := w.idleGoroutines(t)
	stop := w.steady(t, 3)
	data := filepath.Join(w.policies, "data.json")
	raw, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	const storm = 1000
	for i := range storm {
		if i == storm/2 {
			doc["storm_marker"] = i
			b, _ := json.Marshal(doc)
			if err := os.WriteFile(data, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w.hup(t)
		time.Sleep(2 * time.Millisecond)
	}
	// After the storm, one more SIGHUP: the revision serving is the last file.
	time.Sleep(200 * time.Millisecond)
	w.hup(t)
	pi := w.policyWait(t, "after the storm", func(pi writproc.PolicyInfo) bool {
		ok, _ := reloads(pi)
		return pi.Revision != start.Revision && pi.LastReload != nil && pi.LastReload.OK && ok >= 2
	})
	ok, failedN := reloads(pi)
	t.Logf("%d SIGHUPs: %d reloads ran (signals arriving during a reload coalesce), %d failed", storm+1, ok, failedN)
	if failedN != 0 {
		t.Errorf("%d reloads failed in the storm", failedN)
	}
	if n := stop(); n == 0 {
		t.Fatal("no traffic ran")
	}
	if st, body, err := w.send(t.Context(), w.outsider, nil); !deniedTenant(st, body, err) {
		t.Errorf("after the storm the policy does not deny the outsider: %d %v %s", st, err, body)
	}
	w.settled(t, before)
}
