package authz

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReloadOnSIGHUP: a real SIGHUP to the process reloads the policy.
func TestReloadOnSIGHUP(t *testing.T) {
	dir := copyPolicies(t)
	p, err := LoadPolicy(context.Background(), []string{dir}, LoadOptions{SkipTests: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEngine(p, Options{})
	r := NewReloader(e, []string{dir}, LoadOptions{SkipTests: true}, nil)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.OnSignal(ctx, sig); close(done) }()
	defer func() { cancel(); <-done }()
	setData(t, dir, `"ownership": "agent"`, `"ownership": "user"`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.Policy().Revision == p.Revision && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e.Policy().Revision == p.Revision {
		t.Fatal("SIGHUP did not reload")
	}
}

// TestConcurrentDecisions: decisions in parallel share cached input values and the
// decision cache safely (run under -race), and agree with a sequential decision.
func TestConcurrentDecisions(t *testing.T) {
	e, err := NewEngine(loadShipped(t), Options{CacheSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	targets := []*Target{sanctions, kyc, marketing}
	want := make([]bool, len(targets))
	for i, tg := range targets {
		d, _ := e.Decide(context.Background(), BuildInput(facts(investigator, tg)))
		want[i] = d.Allow
	}
	errs := make(chan string, 64)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				k := (g + i) % len(targets)
				f := facts(investigator, targets[k])
				f.Request.ContextID = strconv.Itoa(i % 5) // some hits, some misses, evictions
				d, _ := e.Decide(context.Background(), BuildInput(f))
				if d.Allow != want[k] {
					errs <- targets[k].Name
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s decided differently under concurrency", name)
	}
}
