package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/syncbuf"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
)

// The tests run from the repository root, where the seed config's paths
// resolve.
func chdirRoot(t testing.TB) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	t.Chdir(filepath.Join(filepath.Dir(file), ".."))
}

// seed is the seed's configuration on loopback ports of its own, with the
// decision log off, no push and a memory store; mutate (nil: none) changes
// it before it is validated.
func seed(t testing.TB, mutate func(*config.Config)) *config.Config {
	t.Helper()
	chdirRoot(t)
	cfg, err := config.Load("testdata/config/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Push.Disabled = true
	cfg.Store.Kind = config.StoreMemory
	cfg.DecisionLog.Output = "off"
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// shutdown stops s within 5s and fails the test on any error.
func shutdown(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// errorsOf is what writ_component_errors_total reads from s.
func errorsOf(s *Server) map[string]uint64 {
	out := map[string]uint64{}
	s.ComponentErrors(func(c string, n uint64) { out[c] = n })
	return out
}

// TestServeExtProc: envoy.ext_proc_listen starts the ext_proc server beside
// the sidecar (health SERVING for the ExternalProcessor service) and
// shutdown stops it (NOT_SERVING, then closed).
func TestServeExtProc(t *testing.T) {
	cfg := seed(t, func(c *config.Config) { c.Envoy.ExtProcListen = "127.0.0.1:0" })
	sc, err := New(t.Context(), cfg, WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range sc.doors {
		names = append(names, d.Name())
	}
	if strings.Join(names, ",") != "sidecar,ext_proc" {
		t.Fatalf("doors %v", names)
	}
	conn, err := grpc.NewClient("passthrough:///"+sc.ListenerAddr("envoy.ext_proc_listen"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", resp, err)
	}
	shutdown(t, sc)
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("ext_proc still answers after shutdown")
	}
}

// TestShutdownReturnsDecisionLogLosses: a decision log whose writes fail (the
// disk is full) loses the lines of the decisions made; Shutdown returns
// that, logs it and counts it under decision_log.
//
// Threat: audit lines lost without a trace: writ stops, the log file lacks
// decisions, and nothing (exit status, log, metric) says so. Defence: the
// decision log's Close error and the lines it lost on the way are returned
// by Shutdown, logged, and counted in writ_component_errors_total.
func TestShutdownReturnsDecisionLogLosses(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	cfg := seed(t, func(c *config.Config) { c.DecisionLog.Output = "/dev/full" })
	var logs syncbuf.Buffer
	s, err := New(t.Context(), cfg, WithLogger(NewLogger(&logs, slog.LevelInfo)), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.URL()+"/", "application/json", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-1","role":"user","parts":[{"kind":"text","text":"Screen Acme"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "decision_log") || !strings.Contains(err.Error(), "audit lines lost") {
		t.Fatalf("shutdown: %v", err)
	}
	if n := errorsOf(s)["decision_log"]; n != 1 {
		t.Errorf("decision_log errors counted: %d", n)
	}
	if !strings.Contains(logs.String(), "audit lines may be lost") {
		t.Errorf("not logged:\n%s", logs.String())
	}
	if again := s.Shutdown(ctx); again == nil || again.Error() != err.Error() {
		t.Errorf("a second Shutdown: %v", again)
	}
}

// failingListener accepts nothing: its first Accept fails for good, as a
// listener whose socket was closed under it does.
type failingListener struct{ net.Listener }

var errListenerGone = errors.New("the socket went away")

func (l *failingListener) Accept() (net.Conn, error) { return nil, errListenerGone }

// TestListenerStoppingIsReported: a sidecar listener that stops serving
// while writ runs is logged and counted at once, and returned by Shutdown.
//
// Threat: writ's main listener dies (its Serve returns) while the process
// and its admin API live on, ready, and nothing says the sidecar no longer
// serves. Defence: every listener's Serve error that is not a shutdown is
// logged, counted in writ_component_errors_total and returned by Shutdown.
func TestListenerStoppingIsReported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s, err := New(t.Context(), seed(t, nil), WithLogger(NewLogger(&logs, slog.LevelInfo)),
		WithListener(&failingListener{Listener: ln}), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for errorsOf(s)["sidecar"] == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := errorsOf(s)["sidecar"]; n != 1 {
		t.Fatalf("sidecar errors counted: %d", n)
	}
	if !strings.Contains(logs.String(), "a listener stopped serving") || !strings.Contains(logs.String(), errListenerGone.Error()) {
		t.Errorf("not logged:\n%s", logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, errListenerGone) {
		t.Errorf("shutdown: %v", err)
	}
}

// fakeDoor is a front door the assembly does not ship: one listener that
// answers 204, and a record of what the assembly asked of it.
type fakeDoor struct {
	listenErr, shutdownErr error
	srv                    *http.Server
	ln                     net.Listener
	listened, stopped      atomic.Bool
}

func (d *fakeDoor) Name() string { return "fake" }

func (d *fakeDoor) Listen() error {
	if d.listenErr != nil {
		return d.listenErr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d.ln = ln
	d.srv = &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = d.srv.Serve(ln) }()
	d.listened.Store(true)
	return nil
}

func (d *fakeDoor) Addrs() map[string]string {
	return map[string]string{"fake.listen": d.ln.Addr().String()}
}

func (d *fakeDoor) Shutdown(ctx context.Context) error {
	d.stopped.Store(true)
	return errors.Join(d.srv.Shutdown(ctx), d.shutdownErr)
}

// withDoor adds d to the doors for the test: the one entry a new door is.
func withDoor(t *testing.T, d *fakeDoor) {
	saved := doors
	doors = append(doors[:len(doors):len(doors)], struct {
		name  string
		build func(p *doorParts) (Door, error)
	}{"fake", func(*doorParts) (Door, error) { return d, nil }})
	t.Cleanup(func() { doors = saved })
}

// TestANewDoorIsOneEntry: a door added to the list as one entry is built,
// opened after the sidecar, reachable by its listener's key, stopped with
// the others, and its errors are returned and counted under its name; a
// door that cannot listen refuses the start and what had started stops.
func TestANewDoorIsOneEntry(t *testing.T) {
	d := &fakeDoor{shutdownErr: errors.New("fake door: cut a request")}
	withDoor(t, d)
	s, err := New(t.Context(), seed(t, nil), WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.ListenerAddr("fake.listen") + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("the fake door answered %d", resp.StatusCode)
	}
	if n, ok := errorsOf(s)["fake"]; !ok || n != 0 {
		t.Errorf("the fake door's errors before shutdown: %d (registered %v)", n, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "fake: fake door: cut a request") {
		t.Errorf("shutdown: %v", err)
	}
	if !d.stopped.Load() || errorsOf(s)["fake"] != 1 {
		t.Errorf("stopped %v, errors %v", d.stopped.Load(), errorsOf(s))
	}

	refused := &fakeDoor{listenErr: errors.New("fake.listen: address in use")}
	withDoor(t, refused)
	cfg := seed(t, nil)
	sidecar, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := sidecar.Addr().String()
	if _, err := New(t.Context(), cfg, WithLogger(quiet()), WithListener(sidecar), WithoutPolicyTests()); err == nil ||
		!strings.Contains(err.Error(), "address in use") {
		t.Fatalf("a door that cannot listen: %v", err)
	}
	if refused.stopped.Load() {
		t.Error("a door that never listened was asked to stop")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the sidecar opened before the failing door still listens")
	}
}

// TestFailedStartStopsWhatStarted: a start that fails late (the admin
// address is taken) closes the file store it had opened (another writ can
// open it at once) and the listener it was given.
func TestFailedStartStopsWhatStarted(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	db := filepath.Join(t.TempDir(), "writ.db")
	cfg := seed(t, func(c *config.Config) {
		c.Admin = taken.Addr().String()
		c.Store = config.Store{Kind: config.StoreFile, Path: db}
	})
	given, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), cfg, WithLogger(quiet()), WithListener(given), WithoutPolicyTests()); err == nil || !strings.HasPrefix(err.Error(), "admin: ") {
		t.Fatalf("New: %v", err)
	}
	if c, err := net.DialTimeout("tcp", given.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the listener New was given still listens after the failed start")
	}
	fs, err := filestore.Open(db, task.MemoryLimits{}, filestore.Options{LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("the store is still held after the failed start: %v", err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReloadEmbedded: with the policies embedded in writ there is nothing
// to reload, and Reload says so; from files, Reload reloads.
func TestReloadEmbedded(t *testing.T) {
	s, err := New(t.Context(), seed(t, func(c *config.Config) { c.Policies = nil }), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	if s.Reloadable() || !errors.Is(s.Reload(t.Context()), ErrNoReload) {
		t.Errorf("embedded: reloadable %v", s.Reloadable())
	}
	f, err := New(t.Context(), seed(t, nil), WithLogger(quiet()), WithoutPolicyTests())
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, f)
	if !f.Reloadable() {
		t.Fatal("policies from files: not reloadable")
	}
	if err := f.Reload(t.Context()); err != nil {
		t.Errorf("reload: %v", err)
	}
	resp, err := http.Get(f.AdminURL() + "/v1/policy")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"ok": 1`) {
		t.Errorf("the admin API does not see the reload: %s", body)
	}
}
