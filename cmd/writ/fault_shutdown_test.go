package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-authz/writ/internal/writproc"
)

// TestShutdownDrains: SIGTERM while a stream is open and its task has a push
// config. writ stops accepting at once (a new connection is refused), lets
// the open stream run to its end, delivers the notification of the task's
// last state, flushes the decision log (the stream's decision and the task's
// last change are in the file), and exits 0 — docs/operations.md's "SIGTERM stops
// accepting, lets in-flight requests and streams finish (30 s), drains the
// push queue and flushes the decision log".
func TestShutdownDrains(t *testing.T) {
	w := startFaultWrit(t, fwOptions{slow: 1500 * time.Millisecond, decisionLog: true,
		extra: "push: {trusted_hosts: [127.0.0.1]}\n"})
	rcv := newPushSink(t, false)

	params := map[string]any{"message": map[string]any{"kind": "message", "messageId": "m-shutdown", "role": "user",
		"parts": []any{map[string]any{"kind": "text", "text": "Screen slowly"}}},
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": rcv.url(), "token": "tok-shutdown"}}}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": params})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, w.URL+"/", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var events []string
	next := func() bool {
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events = append(events, d)
				return true
			}
		}
		return false
	}
	if !next() { // the task, submitted or working: the stream is open
		t.Fatalf("no first event: %d", resp.StatusCode)
	}
	var first struct {
		Result struct {
			ID     string `json:"id"`
			TaskID string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(events[0]), &first); err != nil {
		t.Fatalf("first event %q: %v", events[0], err)
	}
	id := first.Result.ID + first.Result.TaskID
	if id == "" {
		t.Fatalf("first event %q names no task", events[0])
	}

	if err := w.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a new connection refused after SIGTERM", 10*time.Second, func() bool {
		_, _, err := w.send(context.Background(), w.token, nil)
		return err != nil && strings.Contains(err.Error(), "connection refused")
	})
	for next() {
	}
	if len(events) < 2 || !strings.Contains(events[len(events)-1], `"state":"completed"`) {
		t.Fatalf("the open stream did not run to its end: %v", events)
	}
	select {
	case <-w.Exited():
	case <-time.After(35 * time.Second):
		t.Fatal("writ did not exit within its drain deadline")
	}
	if err := w.Stop(); err != nil {
		t.Errorf("writ's exit: %v", err)
	}
	if !rcv.has([]string{id}) {
		t.Errorf("the notification of task %s was not delivered before exit", id)
	}
	lines, err := w.DecisionLines()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lines, func(l writproc.Line) bool { return l.Type == "decision" && l.Operation == "stream" && l.Allow }) ||
		!slices.ContainsFunc(lines, func(l writproc.Line) bool { return l.TaskID == id && l.To == "succeeded" }) ||
		!slices.ContainsFunc(lines, func(l writproc.Line) bool { return l.TaskID == id && l.Type == "push_delivered" }) {
		t.Errorf("the decision log was not flushed at exit (%d lines): %s", len(lines), fmt.Sprint(lines))
	}
}

// TestShutdownSaysAuditLinesLost: the decision log's disk is full (every
// write fails). writ serves on, and at SIGTERM it says the decision log lost
// lines (the log line, the exit status 1) instead of exiting 0 as if every
// decision were on record.
//
// Threat: audit lines lost silently — a shutdown that drops the decision
// log's losses leaves an operator believing the log holds every decision.
// Defence: the assembly's Shutdown returns the decision log's Close error
// and the lines it lost on the way, logs and counts them, and writ serve
// exits 1.
func TestShutdownSaysAuditLinesLost(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	w := startFaultWrit(t, fwOptions{decisionLogTo: "/dev/full"})
	if st, body, err := w.send(context.Background(), w.token, nil); !completed(st, body, err) {
		t.Fatalf("a request: %d %s %v", st, body, err)
	}
	if err := w.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Exited():
	case <-time.After(35 * time.Second):
		t.Fatal("writ did not exit within its drain deadline")
	}
	var exit *exec.ExitError
	if err := w.Stop(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("writ's exit: %v, want exit status 1", err)
	}
	if !w.logHas("audit lines may be lost", "audit lines lost since the start") {
		t.Errorf("the loss is not in writ's log:\n%s", w.Log())
	}
}
