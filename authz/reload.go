package authz

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ReloadResult records one reload attempt, for the admin API and the log.
type ReloadResult struct {
	At       time.Time `json:"at"`
	OK       bool      `json:"ok"`
	Revision string    `json:"revision"`
	Error    string    `json:"error,omitempty"`
}

// Reloader rebuilds the engine's policy from its files: on demand, on SIGHUP (the
// caller forwards signals to Reload), and when a watched file changes. A set that
// fails to compile or fails its own tests is refused and the last good revision
// keeps serving.
type Reloader struct {
	engine   *Engine
	paths    []string
	load     func(context.Context, LoadOptions) (*Policy, error)
	opt      LoadOptions
	log      *slog.Logger
	mu       sync.Mutex // one reload at a time
	last     atomic.Pointer[ReloadResult]
	ok, fail atomic.Uint64
	// Debounce groups a burst of file events into one reload (default 200ms).
	Debounce time.Duration
	// After, when set, is called after every reload attempt, good or
	// refused, with its result (one at a time). Set it before the first
	// reload.
	After func(ReloadResult)
}

// NewReloader returns a reloader of the engine's policy from paths.
func NewReloader(e *Engine, paths []string, opt LoadOptions, log *slog.Logger) *Reloader {
	if log == nil {
		log = slog.Default()
	}
	r := &Reloader{engine: e, paths: paths, opt: opt, log: log, Debounce: 200 * time.Millisecond}
	r.last.Store(&ReloadResult{At: e.Policy().Loaded, OK: true, Revision: e.Policy().Revision})
	return r
}

// NewSourceReloader returns a reloader of the engine's policy from load
// instead of files (a policy bundle's latest download): Reload calls it
// with opt and applies the same gate and the same swap as for files (the
// set's tests and known requests are load's to run with opt; a set it
// refuses keeps the last good one serving). Watch has nothing to watch.
func NewSourceReloader(e *Engine, load func(context.Context, LoadOptions) (*Policy, error), opt LoadOptions, log *slog.Logger) *Reloader {
	r := NewReloader(e, nil, opt, log)
	r.load = load
	return r
}

// Reload loads the policy set anew and swaps it in when it is good. An unchanged
// revision is a successful no-op.
func (r *Reloader) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p *Policy
	var err error
	if r.load != nil {
		p, err = r.load(ctx, r.opt)
	} else {
		p, err = LoadPolicy(ctx, r.paths, r.opt)
	}
	res := &ReloadResult{At: time.Now()}
	if err != nil {
		res.Error, res.Revision = err.Error(), r.engine.Policy().Revision
		r.fail.Add(1)
		r.last.Store(res)
		r.log.Error("policy reload refused; the last good policy keeps serving",
			"error", err, "revision", res.Revision)
		if r.After != nil {
			r.After(*res)
		}
		return err
	}
	res.OK, res.Revision = true, p.Revision
	r.ok.Add(1)
	r.last.Store(res)
	if p.Revision != r.engine.Policy().Revision {
		r.engine.Swap(p)
		r.log.Info("policy reloaded", "revision", p.Revision, "files", len(p.Files), "tests_passed", p.Tests.Passed)
	}
	if r.After != nil {
		r.After(*res)
	}
	return nil
}

// Last returns the result of the latest reload attempt.
func (r *Reloader) Last() ReloadResult { return *r.last.Load() }

// Counts returns how many reloads succeeded and failed.
func (r *Reloader) Counts() (ok, failed uint64) { return r.ok.Load(), r.fail.Load() }

// Watch reloads whenever a file under the policy paths changes, until ctx ends.
// New subdirectories are watched as they appear, and so is a policy directory
// replaced whole (renamed away and another put in its place, as a deployment
// that swaps directories does): the parent of each path is watched too, and
// its events about anything but the policy paths are ignored.
func (r *Reloader) Watch(ctx context.Context) error {
	if r.load != nil {
		return nil // no files: the source reloads when it has something new
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching policies: %w", err)
	}
	defer w.Close()
	var roots []string
	for _, p := range r.paths {
		root := filepath.Clean(p)
		if err := addTree(w, root); err != nil {
			return fmt.Errorf("watching %s: %w", p, err)
		}
		if info, err := os.Stat(root); err == nil && !info.IsDir() {
			// A file: its directory is watched (addTree), and every change
			// there counts (a ConfigMap volume swaps ..data, not the file's
			// link).
			root = filepath.Dir(root)
		}
		if parent := filepath.Dir(root); parent != root {
			if err := w.Add(parent); err != nil {
				r.log.Warn("policy watcher cannot watch the policy directory's parent; a directory replaced whole is seen on SIGHUP only",
					"dir", parent, "error", err)
			}
		}
		roots = append(roots, root)
	}
	var timer *time.Timer
	fire := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !under(roots, ev.Name) {
				continue // a sibling in a watched parent
			}
			if ev.Op&fsnotify.Create != 0 {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					if err := addTree(w, ev.Name); err != nil {
						r.log.Warn("policy watcher cannot watch a new directory", "dir", ev.Name, "error", err)
					}
				}
			}
			if timer != nil {
				timer.Stop()
			}
			timer = time.AfterFunc(r.Debounce, func() {
				select {
				case fire <- struct{}{}:
				default:
				}
			})
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Warn("policy watcher error", "error", err)
		case <-fire:
			_ = r.Reload(ctx)
		}
	}
}

// under reports whether name is one of roots or lies below one.
func under(roots []string, name string) bool {
	name = filepath.Clean(name)
	for _, root := range roots {
		if name == root || strings.HasPrefix(name, root+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// addTree watches a directory and every directory below it (or a single file's
// directory).
func addTree(w *fsnotify.Watcher, root string) error {
	info, err := os.Stat(root)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return w.Add(filepath.Dir(root))
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return w.Add(path)
		}
		return nil
	})
}

// OnSignal reloads each time a signal arrives on sig (the caller subscribes it to
// SIGHUP with signal.Notify), until ctx ends.
func (r *Reloader) OnSignal(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-sig:
			if !ok {
				return
			}
			r.log.Info("reloading policies on signal", "signal", s.String())
			_ = r.Reload(ctx)
		}
	}
}
