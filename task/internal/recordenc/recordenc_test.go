package recordenc

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

// full is a record with every encoded field set to a distinct value.
func full() task.Record {
	return task.Record{
		Task: task.Task{
			ID: "t1", ContextID: "c1", State: task.Running, Classification: task.Internal,
			Owner:     task.Owner{AgentID: "a", Tenant: "t", UserID: "u"},
			Artifacts: []string{"x", "y"}, Chain: []string{"o", "p"},
		},
		Agent: "researcher", Protocol: "a2a", Version: "1.0",
		Created: time.Unix(10, 5), Updated: time.Unix(20, 7), Violations: 3,
		Push: []task.PushConfig{{ID: "p1", URL: "https://cb", Token: "tok", AuthScheme: "Bearer", Credentials: "cred"}, {ID: "p2"}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, r := range []task.Record{full(), {}, {Task: task.Task{ID: "x"}, Agent: "a"}} {
		got, err := Record(AppendRecord(nil, &r))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip\n got %+v\nwant %+v", got, r)
		}
	}
	o := task.Owner{AgentID: "a", Tenant: "t\x00", UserID: "u"}
	if got, err := Owner(AppendOwner(nil, o)); err != nil || got != o {
		t.Errorf("owner round trip: %+v %v", got, err)
	}
}

// TestEveryField fails when Record, Task, Owner or PushConfig gain a field:
// the encoding must then learn it (or this list must say why it is not kept).
func TestEveryField(t *testing.T) {
	want := map[reflect.Type][]string{
		reflect.TypeFor[task.Record]():     {"Task", "Agent", "Protocol", "Version", "Created", "Updated", "Violations", "Push"},
		reflect.TypeFor[task.Task]():       {"ID", "ContextID", "State", "InputText", "OutputText", "Structured", "Artifacts", "Chain", "Owner", "Classification"}, // content (InputText, OutputText, Structured) is never stored
		reflect.TypeFor[task.Owner]():      {"AgentID", "Tenant", "UserID"},
		reflect.TypeFor[task.PushConfig](): {"ID", "URL", "Token", "AuthScheme", "Credentials"},
	}
	for typ, fields := range want {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !reflect.DeepEqual(got, fields) {
			t.Errorf("%v has fields %v; the encoding knows %v", typ, got, fields)
		}
	}
}

func TestCorrupt(t *testing.T) {
	r := full()
	b := AppendRecord(nil, &r)
	for i := range len(b) {
		if _, err := Record(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
	if _, err := Record(append(b, 0)); !errors.Is(err, ErrCorrupt) {
		t.Error("trailing byte accepted")
	}
	if _, err := Record([]byte{9}); !errors.Is(err, ErrCorrupt) {
		t.Error("unknown version accepted")
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	r := full()
	var buf []byte
	for b.Loop() {
		buf = AppendRecord(buf[:0], &r)
		if _, err := Record(buf); err != nil {
			b.Fatal(err)
		}
	}
}
