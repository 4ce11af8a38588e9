package leakcheck

import "testing"

func TestCountGoroutines(t *testing.T) {
	prof := `goroutine profile: total 9
4 @ 0x1 0x2
#	0x1	net/http.(*persistConn).readLoop+0x171	/go/src/net/http/transport.go:2330

2 @ 0x1 0x3
#	0x3	net/http.(*persistConn).roundTrip+0x9	/go/src/net/http/transport.go:2700
#	0x4	github.com/writ-authz/writ/proxy/push.(*Deliverer).attempt+0x9	/x.go:1

1 @ 0x1 0x5
#	0x5	net/http.(*conn).serve+0x68f	/go/src/net/http/server.go:2067

2 @ 0x1 0x6
#	0x6	github.com/writ-authz/writ/decisionlog.(*Log).run+0x76	/x.go:297
`
	total, conns := CountGoroutines([]byte(prof))
	if total != 9 || conns != 5 {
		t.Fatalf("total %d, conns %d; want 9 and 5 (a request in flight is not a connection)", total, conns)
	}
	if n := Count(); n < 1 {
		t.Fatalf("this process has %d goroutines besides connections", n)
	}
}
