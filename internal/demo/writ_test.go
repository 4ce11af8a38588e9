package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// The tests start writ as users do: the writ binary, `writ serve -config`,
// so the wiring they exercise is cmd/writ's own and not a copy of it. It is
// built once per test run (with -race when the tests run with it).
var (
	buildOnce sync.Once
	writBin   string
	buildErr  error
)

func buildWrit(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "writ-demo-test-")
		if err != nil {
			buildErr = err
			return
		}
		writBin = filepath.Join(dir, "writ")
		args := []string{"build", "-o", writBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/writ-authz/writ/cmd/writ")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/writ: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return writBin
}

// serveWrit is a StartFunc that runs `writ serve` on the demo's config. writ
// is ready when it logs "writ is serving" (with its addresses); Close sends it
// an interrupt, and a non-zero exit or a race report fails the test.
func serveWrit(t *testing.T) StartFunc {
	bin := buildWrit(t)
	return func(ctx context.Context, cfg *config.Config, _ *slog.Logger) (Writ, error) {
		raw, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(t.TempDir(), "writ.yaml")
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			return nil, err
		}
		w := &process{t: t, ready: make(chan serving, 1), exited: make(chan error, 1)}
		w.cmd = exec.Command(bin, "serve", "-config", file)
		w.cmd.Stderr = w
		if err := w.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { w.exited <- w.cmd.Wait() }()
		select {
		case s := <-w.ready:
			w.url, w.admin = "http://"+s.Listen, "http://"+s.Admin
			return w, nil
		case err := <-w.exited:
			return nil, fmt.Errorf("writ serve exited: %w\n%s", err, w.logs.String())
		case <-ctx.Done():
			w.kill()
			return nil, ctx.Err()
		}
	}
}

type serving struct {
	Msg    string `json:"msg"`
	Listen string `json:"listen"`
	Admin  string `json:"admin"`
}

// process is a running `writ serve`; it is also the writer of its stderr (JSON
// log lines).
type process struct {
	t          *testing.T
	cmd        *exec.Cmd
	url, admin string
	ready      chan serving
	exited     chan error
	logs       syncbuf.Buffer
	mu         sync.Mutex
	partial    []byte
}

func (w *process) Write(p []byte) (int, error) {
	_, _ = w.logs.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		var s serving
		if json.Unmarshal(w.partial[:i], &s) == nil && s.Msg == "writ is serving" {
			select {
			case w.ready <- s:
			default:
			}
		}
		w.partial = w.partial[i+1:]
	}
}

func (w *process) URL() string      { return w.url }
func (w *process) AdminURL() string { return w.admin }

func (w *process) Close() {
	_ = w.cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-w.exited:
	case <-time.After(40 * time.Second): // writ serve drains for up to 30s
		w.kill()
		err = errors.New("writ serve did not stop on an interrupt")
	}
	if err != nil || strings.Contains(w.logs.String(), "DATA RACE") {
		w.t.Errorf("writ serve: %v\n%s", err, w.logs.String())
	}
}

func (w *process) kill() {
	_ = w.cmd.Process.Kill()
	<-w.exited
}
