package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/writ-authz/writ/internal/syncbuf"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const wait = 10 * time.Second // bound on every wait; tests finish far sooner

// received is what a receiver recorded of one request.
type received struct {
	body, token, token2, auth, contentType string
}

// receiver is a callback server on 127.0.0.1. handle decides the status of
// each request (nil: 200); successful requests are recorded in order.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	hits   map[string]int // attempts per body
	handle func(r *http.Request, attempt int) int
}

func newReceiver(t *testing.T, handle func(r *http.Request, attempt int) int) *receiver {
	rv := &receiver{hits: map[string]int{}, handle: handle}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body)
		body := buf.String()
		rv.mu.Lock()
		rv.hits[body]++
		attempt := rv.hits[body]
		rv.mu.Unlock()
		status := http.StatusOK
		if rv.handle != nil {
			status = rv.handle(r, attempt)
		}
		if status < 300 {
			rv.mu.Lock()
			rv.got = append(rv.got, received{body, r.Header.Get("X-A2A-Notification-Token"),
				r.Header.Get("A2A-Notification-Token"), r.Header.Get("Authorization"), r.Header.Get("Content-Type")})
			rv.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *receiver) bodies() []string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := make([]string, len(rv.got))
	for i, g := range rv.got {
		out[i] = g.body
	}
	return out
}

func (rv *receiver) attempts(body string) int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.hits[body]
}

// results collects OnResult calls.
type results struct {
	mu  sync.Mutex
	all []Result
	ch  chan struct{}
}

func (rs *results) add(r Result) {
	rs.mu.Lock()
	rs.all = append(rs.all, r)
	rs.mu.Unlock()
	select {
	case rs.ch <- struct{}{}:
	default:
	}
}

// waitFor blocks until n results arrived, or fails the test at the deadline.
func (rs *results) waitFor(t *testing.T, n int) []Result {
	t.Helper()
	deadline := time.After(wait)
	for {
		rs.mu.Lock()
		if len(rs.all) >= n {
			out := append([]Result(nil), rs.all...)
			rs.mu.Unlock()
			return out
		}
		rs.mu.Unlock()
		select {
		case <-rs.ch:
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %d results", n)
		}
	}
}

// newTestDeliverer trusts 127.0.0.1 in a Guard and uses millisecond backoffs.
func newTestDeliverer(t *testing.T, c DelivererConfig) (*Deliverer, *results) {
	rs := &results{ch: make(chan struct{}, 1)}
	if c.Client == nil {
		c.Client = NewGuard(GuardConfig{TrustedHosts: []string{"127.0.0.1"}}).Client(5*time.Second, 4096)
	}
	if c.BaseBackoff == 0 {
		c.BaseBackoff, c.MaxBackoff = time.Millisecond, 5*time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.OnResult = rs.add
	d := NewDeliverer(c)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		d.Close(ctx)
	})
	return d, rs
}

func note(task, url string, seq uint64) Notification {
	return Notification{TaskID: task, ContextID: "ctx-" + task, URL: url, Seq: seq,
		Body: []byte(fmt.Sprintf("%s/%d", task, seq))}
}

func TestDeliverInSeqOrderWithHeaders(t *testing.T) {
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rv := newReceiver(t, func(r *http.Request, _ int) int {
		once.Do(func() {
			close(first)
			select {
			case <-release:
			case <-time.After(wait):
			}
		})
		return 200
	})
	d, rs := newTestDeliverer(t, DelivererConfig{})
	mk := func(seq uint64) Notification {
		n := note("t1", rv.URL+"/cb?k=v", seq)
		n.Header = http.Header{"X-A2A-Notification-Token": {"tok-1"}, "A2A-Notification-Token": {"tok-1"},
			"Authorization": {"Bearer secret"}}
		n.ContentType = "application/a2a+json"
		return n
	}
	if err := d.Enqueue(mk(1)); err != nil {
		t.Fatal(err)
	}
	select { // Seq 1 is in flight; the rest queue behind it, out of order
	case <-first:
	case <-time.After(wait):
		t.Fatal("first notification never arrived")
	}
	for _, seq := range []uint64{5, 3, 4, 2} {
		if err := d.Enqueue(mk(seq)); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	res := rs.waitFor(t, 5)
	if got, want := strings.Join(rv.bodies(), ","), "t1/1,t1/2,t1/3,t1/4,t1/5"; got != want {
		t.Fatalf("received %s, want %s", got, want)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for _, g := range rv.got {
		if g.token != "tok-1" || g.token2 != "tok-1" || g.auth != "Bearer secret" || g.contentType != "application/a2a+json" {
			t.Fatalf("headers: %+v", g)
		}
	}
	for _, r := range res {
		if !r.Delivered || r.Attempts != 1 || r.Status != 200 || r.Err != nil {
			t.Fatalf("result %+v", r)
		}
	}
	// OnResult runs before the notification leaves the queue's count: wait for it.
	if s := settled(t, d); s.Delivered != 5 || s.Failed != 0 || s.Queued != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestFlakyReceiverGetsEachOnceAfterRetries(t *testing.T) {
	rv := newReceiver(t, func(_ *http.Request, attempt int) int {
		if attempt <= 2 {
			return http.StatusInternalServerError
		}
		return 200
	})
	d, rs := newTestDeliverer(t, DelivererConfig{MaxAttempts: 5})
	for seq := uint64(1); seq <= 3; seq++ {
		if err := d.Enqueue(note("t1", rv.URL, seq)); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs.waitFor(t, 3) {
		if !r.Delivered || r.Attempts != 3 {
			t.Fatalf("result %+v, want delivered after 3 attempts", r)
		}
	}
	if got := strings.Join(rv.bodies(), ","); got != "t1/1,t1/2,t1/3" {
		t.Fatalf("received %s", got)
	}
	if s := d.Stats(); s.Delivered != 3 || s.Retried != 6 {
		t.Fatalf("stats %+v", s)
	}
}

func TestRetryPolicy(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0") // a port nobody listens on
	deadURL := "http://" + closed.Addr().String() + "/cb"
	closed.Close()
	cases := []struct {
		name         string
		status       int
		url          string
		wantAttempts int
	}{
		{"500 is retried", 500, "", 3},
		{"503 is retried", 503, "", 3},
		{"429 is retried", 429, "", 3},
		{"400 is not", 400, "", 1},
		{"404 is not", 404, "", 1},
		{"a redirect is not", 302, "", 1},
		{"a connection error is", 0, deadURL, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rv := newReceiver(t, func(*http.Request, int) int { return c.status })
			url := rv.URL + "/cb"
			if c.url != "" {
				url = c.url
			}
			d, rs := newTestDeliverer(t, DelivererConfig{MaxAttempts: 3})
			if err := d.Enqueue(note("t1", url, 1)); err != nil {
				t.Fatal(err)
			}
			r := rs.waitFor(t, 1)[0]
			if r.Delivered || r.Attempts != c.wantAttempts || r.Err == nil {
				t.Fatalf("result %+v, want failed after %d attempts", r, c.wantAttempts)
			}
			if c.url == "" && rv.attempts("t1/1") != c.wantAttempts {
				t.Fatalf("receiver saw %d attempts", rv.attempts("t1/1"))
			}
			if s := d.Stats(); s.Failed != 1 || s.Retried != uint64(c.wantAttempts-1) {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestTimeoutIsRetried(t *testing.T) {
	rv := newReceiver(t, func(r *http.Request, attempt int) int {
		if attempt == 1 {
			select { // hang until the attempt times out
			case <-r.Context().Done():
			case <-time.After(wait):
			}
		}
		return 200
	})
	d, rs := newTestDeliverer(t, DelivererConfig{AttemptTimeout: 50 * time.Millisecond})
	d.Enqueue(note("t1", rv.URL, 1))
	if r := rs.waitFor(t, 1)[0]; !r.Delivered || r.Attempts != 2 {
		t.Fatalf("result %+v, want delivered on attempt 2", r)
	}
}

func TestGuardRefusalFailsAtOnceAndLogsNoSecrets(t *testing.T) {
	g := NewGuard(GuardConfig{Resolver: newFakeResolver(nil)})
	noDial(t, g)
	var logs syncbuf.Buffer
	d, rs := newTestDeliverer(t, DelivererConfig{
		Client: g.Client(time.Second, 1024),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	for i, u := range []string{
		"http://169.254.169.254/latest/meta-data/?sig=QUERYSECRET",
		"https://127.0.0.1:8443/cb?sig=QUERYSECRET",
		"https://2130706433/cb",
		"https://agents.bank.ae@10.0.0.1/cb",
	} {
		n := note(fmt.Sprintf("t%d", i), u, 1)
		n.Header = http.Header{"X-A2A-Notification-Token": {"TOKENSECRET"}, "Authorization": {"Bearer CREDSECRET"}}
		d.Enqueue(n)
	}
	for _, r := range rs.waitFor(t, 4) {
		var re *RefusedError
		if r.Delivered || r.Attempts != 1 || !errors.As(r.Err, &re) {
			t.Fatalf("result %+v, want refused at once", r)
		}
	}
	s := d.Stats()
	want := map[string]uint64{ReasonLinkLocal: 1, ReasonLoopback: 2, ReasonUserinfo: 1}
	if fmt.Sprint(s.RefusedByGuard) != fmt.Sprint(want) || s.Failed != 4 || s.Retried != 0 {
		t.Fatalf("stats %+v, want refusals %v", s, want)
	}
	out := logs.String()
	for _, secret := range []string{"QUERYSECRET", "TOKENSECRET", "CREDSECRET", "meta-data"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log leaks %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "task_id=t0") || !strings.Contains(out, "host=169.254.169.254") || !strings.Contains(out, "reason=refused:link_local") {
		t.Fatalf("give-up log lacks task, host or reason:\n%s", out)
	}
}

func TestSlowReceiverDoesNotBlockOthers(t *testing.T) {
	release := make(chan struct{})
	slow := newReceiver(t, func(*http.Request, int) int {
		select {
		case <-release:
		case <-time.After(wait):
		}
		return 200
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	fast := newReceiver(t, nil)
	d, rs := newTestDeliverer(t, DelivererConfig{Workers: 2})
	for seq := uint64(1); seq <= 3; seq++ {
		d.Enqueue(note("slow", slow.URL, seq))
	}
	for i := range 20 {
		d.Enqueue(note(fmt.Sprintf("fast%d", i%4), fast.URL, uint64(i)))
	}
	rs.waitFor(t, 20) // every fast one, while the slow receiver still holds its first
	if n := len(fast.bodies()); n != 20 {
		t.Fatalf("fast receiver got %d, want 20", n)
	}
	if n := len(slow.bodies()); n != 0 {
		t.Fatalf("slow receiver finished %d early", n)
	}
	close(release)
	rs.waitFor(t, 23)
	if got := strings.Join(slow.bodies(), ","); got != "slow/1,slow/2,slow/3" {
		t.Fatalf("slow receiver got %s", got)
	}
}

func TestQueueOverflowIsRefusedAndCounted(t *testing.T) {
	release := make(chan struct{})
	rv := newReceiver(t, func(*http.Request, int) int {
		select {
		case <-release:
		case <-time.After(wait):
		}
		return 200
	})
	var logs syncbuf.Buffer
	d, rs := newTestDeliverer(t, DelivererConfig{Workers: 1, QueueSize: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for seq := uint64(1); seq <= 3; seq++ {
		if err := d.Enqueue(note("t1", rv.URL, seq)); err != nil {
			t.Fatalf("enqueue %d: %v", seq, err)
		}
	}
	for seq := uint64(4); seq <= 5; seq++ {
		if err := d.Enqueue(note("t2", rv.URL, seq)); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("enqueue over the cap: %v, want ErrQueueFull", err)
		}
	}
	if s := d.Stats(); s.Dropped != 2 || s.Queued != 3 {
		t.Fatalf("stats %+v", s)
	}
	if !strings.Contains(logs.String(), "queue full") {
		t.Fatalf("overflow not logged:\n%s", logs.String())
	}
	close(release)
	rs.waitFor(t, 3)
	if err := d.Enqueue(note("t2", rv.URL, 6)); err != nil { // room again
		t.Fatalf("enqueue after drain: %v", err)
	}
	rs.waitFor(t, 4)
}

func TestCloseDrains(t *testing.T) {
	rv := newReceiver(t, func(_ *http.Request, attempt int) int {
		if attempt == 1 {
			return 503 // every notification needs a retry, so Close must wait for timers too
		}
		return 200
	})
	d, rs := newTestDeliverer(t, DelivererConfig{})
	for i := range 20 {
		d.Enqueue(note(fmt.Sprintf("t%d", i%4), rv.URL, uint64(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := len(rs.waitFor(t, 20)); n != 20 || len(rv.bodies()) != 20 {
		t.Fatalf("results %d, received %d; want 20", n, len(rv.bodies()))
	}
	if err := d.Enqueue(note("t9", rv.URL, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Enqueue after Close: %v, want ErrClosed", err)
	}
	if s := d.Stats(); s.Queued != 0 || s.Delivered != 20 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRetryWaitFreesTheWorker: with one worker, a notification waiting to
// retry does not hold it; at Close's deadline the waiting one is abandoned.
func TestRetryWaitFreesTheWorkerAndCloseAbandonsAtDeadline(t *testing.T) {
	failing := newReceiver(t, func(*http.Request, int) int { return 500 })
	ok := newReceiver(t, nil)
	d, rs := newTestDeliverer(t, DelivererConfig{Workers: 1, MaxAttempts: 1000, BaseBackoff: time.Hour, MaxBackoff: time.Hour})
	d.Enqueue(note("stuck", failing.URL, 1))
	d.Enqueue(note("stuck", failing.URL, 2))
	deadline := time.Now().Add(wait)
	for failing.attempts("stuck/1") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("first attempt never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 5 {
		d.Enqueue(note("free", ok.URL, uint64(i)))
	}
	rs.waitFor(t, 5)
	if n := len(ok.bodies()); n != 5 {
		t.Fatalf("delivered %d while the other destination waits to retry, want 5", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want DeadlineExceeded", err)
	}
	res := rs.waitFor(t, 7)
	for _, r := range res[5:] {
		if r.Delivered || r.N.TaskID != "stuck" {
			t.Fatalf("abandoned result %+v", r)
		}
	}
	if s := settled(t, d); s.Queued != 0 || s.Failed != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBackoffIsBoundedFullJitter(t *testing.T) {
	d := &Deliverer{cfg: DelivererConfig{BaseBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}}
	for attempts := 1; attempts <= 70; attempts++ {
		ceiling := min(100*time.Millisecond, 10*time.Millisecond<<min(attempts-1, 20))
		for range 50 {
			if w := d.backoff(attempts); w < 0 || w > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", attempts, w, ceiling)
			}
		}
	}
}

// settled returns the deliverer's stats once nothing is queued (OnResult is
// called just before a notification leaves the count).
func settled(t *testing.T, d *Deliverer) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := d.Stats()
		if s.Queued == 0 || time.Now().After(deadline) {
			return s
		}
		time.Sleep(time.Millisecond)
	}
}

// hanging is a receiver that holds every request until released, and records
// how many it held at once.
func hanging(t *testing.T) (rv *receiver, peak func() int, release func()) {
	var mu sync.Mutex
	var now, top int
	gate := make(chan struct{})
	var once sync.Once
	rv = newReceiver(t, func(*http.Request, int) int {
		mu.Lock()
		now++
		top = max(top, now)
		mu.Unlock()
		select {
		case <-gate:
		case <-time.After(wait):
		}
		mu.Lock()
		now--
		mu.Unlock()
		return 200
	})
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return rv, func() int { mu.Lock(); defer mu.Unlock(); return top }, release
}

// Threat: a receiver that hangs on every callback (or a caller flooding
// callbacks at it) takes every push worker, and nobody else's notifications
// are delivered. Defence: a receiver host has at most MaxPerHost attempts in
// flight; the rest of its deliveries wait while other hosts' go on.
func TestHangingHostHoldsOnlyItsShare(t *testing.T) {
	slow, peak, release := hanging(t)
	fast := newReceiver(t, nil)
	d, rs := newTestDeliverer(t, DelivererConfig{Workers: 4, MaxPerHost: 2})
	for i := range 10 {
		d.Enqueue(note(fmt.Sprintf("slow%d", i), slow.URL, 1))
	}
	for i := range 20 {
		n := note(fmt.Sprintf("fast%d", i), fast.URL, 1)
		n.Owner = fmt.Sprintf("owner%d", i%3)
		d.Enqueue(n)
	}
	rs.waitFor(t, 20)
	if n := len(fast.bodies()); n != 20 {
		t.Fatalf("fast receiver got %d, want 20", n)
	}
	if p := peak(); p > 2 {
		t.Fatalf("hanging host held %d attempts at once, share is 2", p)
	}
	release()
	rs.waitFor(t, 30)
	if n := len(slow.bodies()); n != 10 {
		t.Fatalf("slow receiver got %d after release, want 10", n)
	}
}

// Threat: one caller registers callbacks on many hosts that all hang, so the
// host share alone does not stop it taking every worker. Defence: one owner's
// notifications have at most MaxPerOwner attempts in flight.
func TestOneOwnerHoldsOnlyItsShare(t *testing.T) {
	var releases []func()
	var peaks []func() int
	d, rs := newTestDeliverer(t, DelivererConfig{Workers: 4, MaxPerHost: 4, MaxPerOwner: 2})
	for i := range 6 {
		rv, peak, release := hanging(t)
		releases, peaks = append(releases, release), append(peaks, peak)
		n := note(fmt.Sprintf("mallory%d", i), rv.URL, 1)
		n.Owner = "mallory"
		d.Enqueue(n)
	}
	fast := newReceiver(t, nil)
	for i := range 8 {
		n := note(fmt.Sprintf("alice%d", i), fast.URL, 1)
		n.Owner = "alice"
		d.Enqueue(n)
	}
	rs.waitFor(t, 8)
	if n := len(fast.bodies()); n != 8 {
		t.Fatalf("alice's receiver got %d, want 8", n)
	}
	held := 0
	for _, p := range peaks {
		held += p()
	}
	if held > 2 {
		t.Fatalf("mallory held %d attempts at once, share is 2", held)
	}
	for _, r := range releases {
		r()
	}
	rs.waitFor(t, 14)
}

// TestHeaderValueNotASCIIIsNotSent: a notification carrying a header value
// outside printable ASCII (a token stored before such tokens were refused at
// set time) is never sent: refused at once, no retry, the reason a stable
// code; a printable one is delivered.
//
// Threat: a header value that receivers read differently (UTF-8 vs
// Latin-1), or that splits into another header. Defence: the deliverer
// writes only printable-ASCII header values (wire.HeaderValue) and refuses
// the notification otherwise.
func TestHeaderValueNotASCIIIsNotSent(t *testing.T) {
	rv := newReceiver(t, nil)
	d, rs := newTestDeliverer(t, DelivererConfig{})
	bad := note("t1", rv.URL+"/cb", 1)
	bad.Header = http.Header{"X-A2A-Notification-Token": {"tökén"}}
	good := note("t2", rv.URL+"/cb", 1)
	good.Header = http.Header{"X-A2A-Notification-Token": {"tok-1"}}
	for _, n := range []Notification{bad, good} {
		if err := d.Enqueue(n); err != nil {
			t.Fatal(err)
		}
	}
	res := rs.waitFor(t, 2)
	for _, r := range res {
		var refused *RefusedError
		switch r.N.TaskID {
		case "t1":
			if r.Delivered || r.Attempts != 1 || !errors.As(r.Err, &refused) || refused.Reason != ReasonHeaderValue {
				t.Errorf("non-ASCII header: %+v", r)
			}
		case "t2":
			if !r.Delivered {
				t.Errorf("ASCII header: %+v", r)
			}
		}
	}
	if got := rv.bodies(); len(got) != 1 || got[0] != "t2/1" {
		t.Fatalf("the receiver got %v", got)
	}
}
