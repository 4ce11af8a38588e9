package server

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
)

// TestDefaultStorePath: /var/lib/writ when it can be created and written,
// else the XDG state directory (or ~/.local/state), else ./writ-state.
func TestDefaultStorePath(t *testing.T) {
	dir := t.TempDir()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	varLib := filepath.Join(dir, "var", "lib", "writ")
	if got := defaultStorePath(varLib, env(nil)); got != filepath.Join(varLib, "writ.db") {
		t.Errorf("writable /var/lib/writ: %s", got)
	}
	if fi, err := os.Stat(varLib); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the directory is created 0700: %v %v", fi, err)
	}
	if entries, _ := os.ReadDir(varLib); len(entries) != 0 {
		t.Errorf("the probe left %v behind", entries)
	}
	// A directory that cannot be created (under a regular file): the next one.
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	blocked := filepath.Join(file, "writ")
	state := filepath.Join(dir, "state")
	if got := defaultStorePath(blocked, env(map[string]string{"XDG_STATE_HOME": state, "HOME": "/nonexistent"})); got != filepath.Join(state, "writ", "writ.db") {
		t.Errorf("XDG_STATE_HOME: %s", got)
	}
	home := filepath.Join(dir, "home")
	if got := defaultStorePath(blocked, env(map[string]string{"HOME": home})); got != filepath.Join(home, ".local", "state", "writ", "writ.db") {
		t.Errorf("HOME: %s", got)
	}
	// A relative XDG_STATE_HOME is invalid (XDG spec): ignored.
	for _, e := range []map[string]string{nil, {"XDG_STATE_HOME": "relative"}} {
		if got := defaultStorePath(blocked, env(e)); got != filepath.Join("writ-state", "writ.db") {
			t.Errorf("%v: %s", e, got)
		}
	}
}

// TestServeStoreKinds: `writ serve` reads an empty store kind as file, at
// the path it names (and holds it: a second writ cannot open it); memory is
// taken as configured, with nothing to resume.
func TestServeStoreKinds(t *testing.T) {
	chdirRoot(t)
	raw, err := os.ReadFile("testdata/config/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Written elsewhere, seed.yaml's paths (relative to its own directory)
	// are made absolute.
	seedDir, err := filepath.Abs("testdata/config")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte(" ../"), []byte(" "+seedDir+"/../"))
	raw = bytes.ReplaceAll(raw, []byte("[../"), []byte("["+seedDir+"/../"))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "writ.yaml")
	db := filepath.Join(dir, "state", "writ.db")
	os.WriteFile(cfg, append(raw, []byte("store: {path: "+db+"}\n")...), 0o600)
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Store.Kind = config.StoreFile // what writ serve does with an empty kind
	log := slog.New(slog.DiscardHandler)
	s, err := openStore(c, log, events.Nop{})
	if err != nil {
		t.Fatal(err)
	}
	if s.queue == nil || s.ping == nil || s.ping(t.Context()) != nil || s.desc != "file at "+db {
		t.Errorf("file store: %+v", s)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("no file at the configured path: %v", err)
	}
	// The core defers an answer's writes to one commit wait through the
	// store the assembly gives it: the file store's Defer, not hidden.
	d := task.Defer(s)
	if typ := reflect.TypeOf(d); typ.Kind() != reflect.Pointer || typ.Elem().PkgPath() != "github.com/writ-authz/writ/task/filestore" {
		t.Errorf("the assembled file store defers as %T, not as the file store's batch: every write waits for its own commit", d)
	}
	if _, err := filestore.Open(db, task.MemoryLimits{}, filestore.Options{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, filestore.ErrLocked) {
		t.Errorf("a second writ on the same file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.Store.Kind, c.Store.Path = config.StoreMemory, ""
	if m, err := openStore(c, log, events.Nop{}); err != nil || m.queue != nil || m.ping != nil || m.Close() != nil {
		t.Errorf("memory store: %+v %v", m, err)
	}
}
