package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StartScript runs `node <script> --port 0 <args>` in testdata/peers/js (a
// server that prints `READY <port>`, such as interop-agent.mjs), waits for it
// and returns http://127.0.0.1:port. A cleanup stops it; it also exits on its
// own if the test process dies (its stdin closes).
func StartScript(t testing.TB, script string, args ...string) (baseURL string) {
	t.Helper()
	return startScript(t, script, append([]string{script, "--port", "0"}, args...))
}

// RunScript runs `node <script> <args>` in testdata/peers/js with a time
// limit and returns its JSON output lines (one object per line). The error is
// non-nil when the script exits non-zero or prints a line that is not JSON;
// the lines read are returned either way.
func RunScript(t testing.TB, limit time.Duration, script string, args ...string) ([]map[string]any, error) {
	t.Helper()
	dir := EnsureNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = stopTimeout
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var lines []map[string]any
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return lines, fmt.Errorf("%s printed a line that is not a JSON object: %q (stderr: %s)", script, text, stderr.String())
		}
		lines = append(lines, m)
	}
	if runErr != nil {
		return lines, fmt.Errorf("%s: %w (stderr: %s)", strings.Join(append([]string{script}, args...), " "), runErr, strings.TrimSpace(stderr.String()))
	}
	return lines, nil
}
