package writproc

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
}

func TestParseMetrics(t *testing.T) {
	m := ParseMetrics([]byte("# HELP x\ngo_goroutines 42\nwrit_tasks{state=\"running\"} 3\nwrit_tasks{state=\"succeeded\"} 7\n" +
		"writ_push_deliveries_total{result=\"delivered\"} 5\nwrit_push_deliveries_total{result=\"failed\"} 1\n"))
	if m["go_goroutines"] != 42 || m.Sum("writ_tasks") != 10 || m.Sum("writ_push_deliveries_total", `result="delivered"`) != 5 {
		t.Fatalf("%v", m)
	}
}
