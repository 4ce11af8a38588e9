package decisionlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

func taskEvent(i int) events.Task {
	return events.Task{Time: t0, Kind: events.TaskStateChanged, Route: "r", TaskID: fmt.Sprintf("task-%03d", i), ContextID: "ctx", From: task.Queued, To: task.Running}
}

func lineLen(t *testing.T) int {
	return len(appendTask(nil, new(taskEvent(0))))
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		return nil
	}
	return lines(string(raw))
}

// TestRotation: at most MaxBackups rotated files, none beyond the threshold,
// the newest lines in the live file and nothing lost in between.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.log")
	// A stale backup from a larger max_backups goes at the first rotation.
	if err := os.WriteFile(path+".5", []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	L := lineLen(t)
	maxBytes := int64(3*L + L/2) // three lines a file
	l, err := newLog(config.DecisionLog{Output: path, MaxBackups: 2}, options{maxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		l.TaskChanged(taskEvent(i))
	}
	closeLog(t, l)
	if s := l.Stats(); s != (Stats{Written: n}) {
		t.Errorf("stats %+v", s)
	}

	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := "[decisions.log decisions.log.1 decisions.log.2]"; fmt.Sprint(names) != want {
		t.Fatalf("files %v, want %s", names, want)
	}
	var all []string
	for _, name := range []string{path + ".2", path + ".1", path} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > maxBytes {
			t.Errorf("%s is %d bytes, beyond %d", name, st.Size(), maxBytes)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, st.Mode().Perm())
		}
		ls := readLines(t, name)
		if len(ls) == 0 {
			t.Errorf("%s is empty", name)
		}
		all = append(all, ls...)
	}
	// 20 lines, 3 a file: 18 rotated away in 6 files of which 2 kept, 2 live.
	live := readLines(t, path)
	if len(live) != 2 || !strings.Contains(live[1], `"task-019"`) {
		t.Errorf("live file %q, want the 2 newest lines", live)
	}
	if len(all) != 8 {
		t.Fatalf("%d lines kept, want 8", len(all))
	}
	for i, s := range all {
		if want := fmt.Sprintf(`"task_id":"task-%03d"`, n-8+i); !strings.Contains(s, want) {
			t.Errorf("kept line %d is %s, want %s", i, s, want)
		}
	}
}

// TestRotationAppends: an existing file is appended to, and its size counts.
func TestRotationAppends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.log")
	L := lineLen(t)
	cfg := config.DecisionLog{Output: path, MaxBackups: 3}
	o := options{maxBytes: int64(3 * L)}
	for round := range 2 {
		l, err := newLog(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			l.TaskChanged(taskEvent(round*2 + i))
		}
		closeLog(t, l)
	}
	old, live := readLines(t, path+".1"), readLines(t, path)
	if len(old) != 3 || len(live) != 1 || !strings.Contains(old[0], "task-000") || !strings.Contains(live[0], "task-003") {
		t.Errorf("after two runs: %s.1 %q, live %q", path, old, live)
	}
}

// TestRotationHugeLine: a line beyond the threshold goes alone into a fresh file.
func TestRotationHugeLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	l, err := newLog(config.DecisionLog{Output: path, MaxBackups: 1}, options{maxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	l.TaskChanged(taskEvent(1))
	l.TaskChanged(taskEvent(2))
	closeLog(t, l)
	if a, b := readLines(t, path+".1"), readLines(t, path); len(a) != 1 || len(b) != 1 || !strings.Contains(b[0], "task-002") {
		t.Errorf("backup %q, live %q", a, b)
	}
}
