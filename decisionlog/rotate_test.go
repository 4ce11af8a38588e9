package decisionlog

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

func taskEvent(i int) events.Task {
	return events.Task{Time: t0, Kind: events.TaskStateChanged, Route: "r", TaskID: fmt.Sprintf("task-%03d", i), ContextID: "ctx", From: task.Queued, To: task.Running}
}

// lineLen is the length of a task line with a two-digit seq.
func lineLen() int {
	return len(appendTask(nil, new(taskEvent(0)), &seal{seq: 99}))
}

// headerLen and checkpointLen bound the custody lines of an unsigned log.
func headerLen(name string) int {
	return len(appendLogContinued(nil, t0, newLogID(), name, &seal{seq: 99}))
}

func checkpointLen() int {
	return len(appendCheckpoint(nil, t0, newLogID(), CheckpointRotation, "", &seal{seq: math.MaxUint64}))
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

// types are the lines' types.
func types(t *testing.T, ls []string) []string {
	t.Helper()
	var out []string
	for _, s := range ls {
		var ln Line
		if err := json.Unmarshal([]byte(s), &ln); err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		out = append(out, ln.Type)
	}
	return out
}

// verifyOK verifies the files and fails the test unless every line does.
func verifyOK(t *testing.T, keys *Keys, paths ...string) *Verification {
	t.Helper()
	v, err := Verify(paths, keys)
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() {
		t.Fatalf("verify: %v", v.Failure)
	}
	return v
}

// TestRotation: at most MaxBackups rotated files, none beyond the threshold,
// the newest lines in the live file, nothing lost in between, and the chain
// running through the files: each rotated file ends with a checkpoint, and
// the next begins with the line that continues it.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.log")
	// A stale backup from a larger max_backups goes at the first rotation.
	if err := os.WriteFile(path+".5", []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Three task lines a file, with its header and the room kept for two
	// checkpoints.
	maxBytes := int64(3*lineLen() + headerLen("decisions.log.1") + 2*checkpointLen() + lineLen()/2)
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
	for i, name := range []string{path + ".2", path + ".1", path} {
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
		ty := types(t, ls)
		last := CheckpointRotation
		if i == 2 {
			last = CheckpointClose
		}
		if len(ty) < 3 || ty[0] != TypeLogContinued || ty[len(ty)-1] != TypeCheckpoint || !strings.Contains(ls[len(ls)-1], `"reason":"`+last+`"`) {
			t.Errorf("%s: lines %v: want a log_continued first and a %s checkpoint last", name, ty, last)
		}
		all = append(all, eventLines(strings.Join(ls, "\n"))...)
	}
	// 3 events a file: the 20 filled 7 files, of which the 3 newest are kept.
	live := eventLines(strings.Join(readLines(t, path), "\n"))
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
	// Given in any order, the files verify as one log; its start is gone.
	v := verifyOK(t, nil, path, path+".2", path+".1")
	if len(v.Sequences) != 1 {
		t.Fatalf("sequences %+v", v.Sequences)
	}
	s := v.Sequences[0]
	if fmt.Sprint(s.Files) != fmt.Sprint([]string{path + ".2", path + ".1", path}) || !s.Closed || s.After != 0 ||
		s.Checkpoints != 3 || len(s.Notes) == 0 || !strings.Contains(s.Notes[0], "begins in the middle of log") {
		t.Errorf("sequence %+v", s)
	}
}

// TestRotationAppends: an existing file is appended to, its size counts, and
// the new run chains to its last line.
func TestRotationAppends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.log")
	cfg := config.DecisionLog{Output: path, MaxBackups: 3}
	for round := range 2 {
		l, err := newLog(cfg, options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			l.TaskChanged(taskEvent(round*2 + i))
		}
		closeLog(t, l)
	}
	ls := readLines(t, path)
	want := []string{TypeLogStarted, TypeTaskStateChanged, TypeTaskStateChanged, TypeCheckpoint,
		TypeLogStarted, TypeTaskStateChanged, TypeTaskStateChanged, TypeCheckpoint}
	if got := types(t, ls); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after two runs: %v, want %v", got, want)
	}
	v := verifyOK(t, nil, path)
	if s := v.Sequences[0]; len(s.Logs) != 2 || s.Logs[0] == s.Logs[1] || !s.Closed || s.Lines != 8 {
		t.Errorf("sequence %+v: want two runs of one chain", s)
	}
}

// TestRestartOnFullFile: a run that starts on a file with no room rotates it
// first, and its log_started line chains to the rotated file's last line.
func TestRestartOnFullFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	cfg := config.DecisionLog{Output: path, MaxBackups: 3}
	o := options{maxBytes: int64(3*lineLen() + headerLen("x") + 2*checkpointLen())}
	l, err := newLog(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		l.TaskChanged(taskEvent(i))
	}
	closeLog(t, l)
	if got := types(t, readLines(t, path)); len(got) != 5 {
		t.Fatalf("first run: %v, want it in one file", got)
	}
	l, err = newLog(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	l.TaskChanged(taskEvent(3))
	closeLog(t, l)
	if got := types(t, readLines(t, path)); fmt.Sprint(got) != fmt.Sprint([]string{TypeLogStarted, TypeTaskStateChanged, TypeCheckpoint}) {
		t.Errorf("second run's file: %v", got)
	}
	v := verifyOK(t, nil, path, path+".1")
	if s := v.Sequences[0]; len(v.Sequences) != 1 || len(s.Logs) != 2 || s.Files[0] != path+".1" {
		t.Errorf("sequences %+v", v.Sequences)
	}
}

// TestRotationHugeLine: a line beyond the threshold goes alone into a fresh
// file (with the file's header and checkpoint).
func TestRotationHugeLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	l, err := newLog(config.DecisionLog{Output: path, MaxBackups: 1}, options{maxBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	l.TaskChanged(taskEvent(1))
	l.TaskChanged(taskEvent(2))
	closeLog(t, l)
	a, b := readLines(t, path+".1"), readLines(t, path)
	ea, eb := eventLines(strings.Join(a, "\n")), eventLines(strings.Join(b, "\n"))
	if len(ea) != 1 || len(eb) != 1 || !strings.Contains(eb[0], "task-002") {
		t.Errorf("backup %q, live %q", a, b)
	}
	verifyOK(t, nil, path+".1", path)
}

// TestSpecialFileNotRotated: a decision log written to a FIFO (a log shipper
// reading it) with a size bound far below what is written is never rotated:
// the path stays the FIFO, and every line reaches its reader.
//
// Threat: a log pointed at a device or a pipe (/dev/null, /dev/stdout, a
// shipper's FIFO) with max_size_mb set is "rotated": the device is renamed or
// removed and a regular file put in its place, so a shipper reads nothing
// and, for /dev/null, every other program on the host that opens it gets a
// growing file or no such file. Defence: a live path that is not a regular
// file is never rotated.
func TestSpecialFileNotRotated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	got := make(chan int)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			got <- -1
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- strings.Count(string(b), "\n")
	}()
	r, err := openRotating(path, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 100) + "\n"
	for range 5 {
		if r.full(0, len(line)) {
			if err := r.rotate(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 5 {
		t.Errorf("the FIFO's reader got %d lines, want 5", n)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the log's path is no longer the FIFO: %v %v", st.Mode(), err)
	}
}
