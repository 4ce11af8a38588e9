package push

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOnAttempt: every attempt is reported, with its number, before the final
// outcome.
func TestOnAttempt(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var mu sync.Mutex
	var attempts []Result
	done := make(chan Result, 1)
	d := NewDeliverer(DelivererConfig{Client: srv.Client(), BaseBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
		OnAttempt: func(r Result) { mu.Lock(); attempts = append(attempts, r); mu.Unlock() },
		OnResult:  func(r Result) { done <- r }})
	defer d.Close(t.Context())
	if err := d.Enqueue(Notification{TaskID: "t", URL: srv.URL, Body: []byte("{}"), Seq: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		mu.Lock()
		defer mu.Unlock()
		if !r.Delivered || len(attempts) != 3 || attempts[0].Attempts != 1 || attempts[0].Delivered ||
			attempts[0].Status != 503 || !attempts[2].Delivered {
			t.Fatalf("final %+v attempts %+v", r, attempts)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no final result")
	}
}
