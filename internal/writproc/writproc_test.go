package writproc

import "testing"

func TestParseMetrics(t *testing.T) {
	m := ParseMetrics([]byte("# HELP x\ngo_goroutines 42\nwrit_tasks{state=\"running\"} 3\nwrit_tasks{state=\"succeeded\"} 7\n" +
		"writ_push_deliveries_total{result=\"delivered\"} 5\nwrit_push_deliveries_total{result=\"failed\"} 1\n"))
	if m["go_goroutines"] != 42 || m.Sum("writ_tasks") != 10 || m.Sum("writ_push_deliveries_total", `result="delivered"`) != 5 {
		t.Fatalf("%v", m)
	}
}

func TestHasConfigKey(t *testing.T) {
	if !HasConfigKey("agents") || HasConfigKey("no_such_key") {
		t.Fatal("HasConfigKey")
	}
}
