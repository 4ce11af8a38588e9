package filestore

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/writ-authz/writ/task"
)

func TestScratchGet(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "w.db"), task.MemoryLimits{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const N = 2000
	for i := range N {
		r := task.Record{Agent: "a", Task: task.Task{ID: fmt.Sprintf("t-%d", i), ContextID: fmt.Sprintf("c-%d", i), State: task.Running,
			Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale", UserID: "u-42"}, Chain: []string{"orchestrator"}}}
		if err := s.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	var a, b []time.Duration
	for i := range N {
		st := time.Now()
		s.Get(t.Context(), task.Ref{Agent: "a", ID: fmt.Sprintf("t-%d", i)})
		a = append(a, time.Since(st))
		st = time.Now()
		s.Get(t.Context(), task.Ref{Agent: "a", ID: fmt.Sprintf("u-%d", i)})
		b = append(b, time.Since(st))
	}
	slices.Sort(a)
	slices.Sort(b)
	t.Logf("hit %v miss %v", a[N/2], b[N/2])
}
