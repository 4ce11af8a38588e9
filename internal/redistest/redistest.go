// Package redistest runs a real redis-server (Debian's package) for tests: on
// a free loopback port, in a temporary directory, without persistence unless
// asked, stopped at the test's cleanup. It installs nothing: outside CI a test
// is skipped when redis-server is not on PATH, in CI it fails (`make test`
// and .ci/deps install it).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	readyTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
)

// Server is one redis-server process.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// Start starts a redis-server on a free loopback port with args added to its
// command line (e.g. "--requirepass", "s3cret"), and stops it at cleanup.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH: CI must run the Redis store tests (.ci/deps installs it)")
		}
		t.Skip("redis-server is not on PATH; skipping the Redis tests (make test-deps installs it)")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: args}
	t.Cleanup(s.Stop)
	s.Restart()
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Restart starts the server again (on the same port and directory) if it is
// stopped, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	argv := append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
		"--loglevel", "warning",
	}, s.args...)
	deadline := time.Now().Add(readyTimeout)
	for {
		cmd := exec.Command(s.bin, argv...)
		cmd.Dir = s.dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			s.t.Fatalf("redistest: start redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if s.waitReady(exited, deadline) {
			s.cmd, s.exited = cmd, exited
			return
		}
		_ = cmd.Process.Kill()
		<-exited
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: redis-server did not answer on %s within %v:\n%s", s.Addr(), readyTimeout, out.String())
		}
		time.Sleep(100 * time.Millisecond) // the port may still be held: retry
	}
}

// waitReady pings the server until it answers, it exits or the deadline passes.
func (s *Server) waitReady(exited <-chan struct{}, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			// A server with a password answers -NOAUTH: it is up all the same.
			if strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH") {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// Stop stops the server (SIGTERM, then SIGKILL after a timeout) if it runs.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Running reports whether the server is started.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// freePort asks the kernel for a free loopback port.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// String names the server, for messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr()) }
