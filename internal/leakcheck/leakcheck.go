// Package leakcheck counts goroutines the way the fault tests and the soak
// judge leaks: every goroutine except those of HTTP connections (a client's
// pooled readLoop/writeLoop, a server's conn.serve), which come and go with
// keep-alive pools and their timeouts. Everything else a piece of load or a
// fault started must be gone once it is over. Test support; never on the
// serving path.
package leakcheck

import (
	"bytes"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connFrames mark the goroutines of an HTTP connection (not of a request in
// flight on one, whose stack shows its caller).
var connFrames = []string{"net/http.(*persistConn).readLoop", "net/http.(*persistConn).writeLoop",
	"net/http.(*conn).serve", "net/http.(*connReader).backgroundRead"}

// CountGoroutines reads a debug=1 goroutine profile: the total and the
// goroutines of HTTP connections.
func CountGoroutines(profile []byte) (total, conns int) {
	count, isConn := 0, false
	flush := func() {
		total += count
		if isConn {
			conns += count
		}
		count, isConn = 0, false
	}
	for line := range strings.SplitSeq(string(profile), "\n") {
		if n, _, ok := strings.Cut(line, " @ "); ok {
			if c, err := strconv.Atoi(n); err == nil {
				flush()
				count = c
				continue
			}
		}
		for _, f := range connFrames {
			if strings.Contains(line, f) {
				isConn = true
			}
		}
	}
	flush()
	return total, conns
}

// Profile is this process's goroutine profile (debug=1).
func Profile() []byte {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.Bytes()
}

// Count is this process's goroutines other than HTTP connections'.
func Count() int {
	total, conns := CountGoroutines(Profile())
	return total - conns
}

// Settle waits up to within for this process's non-connection goroutines to
// come down to at most want, and fails the test (with the profile) if they
// do not.
func Settle(t testing.TB, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := Count()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutine leak: %d goroutines besides HTTP connections', %d before\n%s", n, want, Profile())
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
