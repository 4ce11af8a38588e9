package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/writ-authz/writ/bench/loadgen"
)

// loadResult is bench/load's JSON summary plus what the harness measured of the
// server around it.
type loadResult struct {
	loadgen.Result
	// CPUus is the server's CPU time (user+system) per call, in µs.
	CPUus float64 `json:"cpu_us"`
}

// server is one `writ serve` pinned to CPU 0, with both of its Envoy doors
// open: ext_authz (gRPC) and ext_proc.
type server struct {
	cmd       *exec.Cmd
	adminAddr string
	log       string
	exited    chan struct{}
}

const grpcPort, adminPort, extProcPort = 19191, 19192, 19193

// ports are the listeners a server opens; none may be in use when it starts.
var ports = []int{grpcPort, adminPort, extProcPort}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// door is one of writ's Envoy front doors as bench/load drives it.
type door struct {
	key   string
	title string // in tables
	unit  string // what one call is
	port  int
	args  []string // bench/load's flags for it
}

var (
	doorAuthz = door{key: "ext_authz", title: "ext_authz check", unit: "check", port: grpcPort}
	// One ext_proc stream per request, as Envoy opens one per HTTP request.
	doorProcRequest = door{key: "ext_proc_request", title: "ext_proc request phase", unit: "stream", port: extProcPort,
		args: []string{"-door", "ext_proc", "-phases", "request"}}
	doorProcBoth = door{key: "ext_proc_both", title: "ext_proc request + response", unit: "stream", port: extProcPort,
		args: []string{"-door", "ext_proc", "-phases", "request+response"}}
)

// writConfig is a writ.yaml like deploy/envoy/writ.yaml for the bench request's
// agent, with the ext_authz and ext_proc doors on loopback. The decision log
// is off: the peer's figures were taken without one. The lifecycle store is a
// file store, as writ serve's default, but in the bench's own directory
// (state): never the host's /var/lib/writ, which other writ processes use.
func writConfig(policies, jwks, state string, cacheSize int) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin: 127.0.0.1:%d
admin_pprof: true
policies: [%s]
decision_cache_size: %d
decision_log: {output: "off"}
store: {kind: file, path: %s}
identity:
  jwt:
    - issuer: https://idp.bank.ae
      audiences: [a2a-gateway]
      jwks_file: %s
agents:
  - name: sanctions-screening-agent
    route: /
    upstream: http://127.0.0.1:9101
    public_url: https://sanctions-screening-agent.agents.bank.ae
    owner: group-compliance
    tenants: [wholesale, retail]
    max_data_classification: restricted
    security_schemes: [oauth2]
    skills:
      - {id: screen, tags: [sanctions, compliance, screening]}
envoy:
  grpc_listen: 127.0.0.1:%d
  ext_proc_listen: 127.0.0.1:%d
  max_request_bytes: 1048576
`, adminPort, policies, cacheSize, filepath.Join(state, "writ.db"), jwks, grpcPort, extProcPort)
}

// startProc starts argv pinned to CPU 0 and waits until it listens on every
// port of wait; none may be in use before it starts.
func startProc(logPath string, wait []int, argv ...string) (*server, error) {
	for _, port := range ports {
		if listening(port) {
			return nil, fmt.Errorf("port %d is in use: another server would answer the load instead of this one", port)
		}
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", append([]string{"-c", "0"}, argv...)...) //nolint:gosec // the binaries this report built, with its own flags
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server stops with the report, however the report ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s := &server{cmd: cmd, adminAddr: loopback(adminPort), log: logPath, exited: exited}
	for range 300 {
		select {
		case <-exited:
			raw, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited:\n%s", filepath.Base(argv[0]), raw)
		default:
		}
		up := true
		for _, port := range wait {
			up = up && listening(port)
		}
		if up {
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	raw, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("%s did not start:\n%s", filepath.Base(argv[0]), raw)
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
	// Wait until the ports are free for the next server.
	for range 100 {
		if !listening(grpcPort) && !listening(extProcPort) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listening reports whether something accepts connections on the loopback port.
func listening(port int) bool {
	c, err := net.Dial("tcp", loopback(port))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// cpuTicks is the server's user+system time in clock ticks (USER_HZ, 100/s).
func (s *server) cpuTicks() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	rest := string(raw[bytes.LastIndexByte(raw, ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

// rssMiB reads VmRSS of the server.
func (s *server) rssMiB() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// metric reads one sample of a Prometheus metric from the admin listener.
func (s *server) metric(name string) float64 {
	resp, err := http.Get("http://" + s.adminAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v
		}
	}
	return 0
}

// profile records a CPU profile of the server for d while fn runs.
func (s *server) profile(out string, d time.Duration, fn func()) error {
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.adminAddr, int(d.Seconds())))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(out)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		f.Close()
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	fn()
	return <-done
}

// load runs bench/load pinned to CPU 1 against the server's door d.
func (s *server) load(loadBin string, d door, requests string, args ...string) (loadResult, error) {
	select {
	case <-s.exited:
		raw, _ := os.ReadFile(s.log)
		return loadResult{}, fmt.Errorf("writ exited:\n%s", raw)
	default:
	}
	argv := append([]string{"-c", "1", loadBin, "-addr", loopback(d.port), "-requests", requests}, d.args...)
	argv = append(argv, args...)
	t0 := s.cpuTicks()
	out, err := exec.Command("taskset", argv...).Output()
	t1 := s.cpuTicks()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return loadResult{}, fmt.Errorf("load %v: %w: %s", args, err, ee.Stderr)
		}
		return loadResult{}, err
	}
	var r loadResult
	if err := json.Unmarshal(out, &r); err != nil {
		return loadResult{}, fmt.Errorf("load output %q: %w", out, err)
	}
	if r.Count > 0 {
		r.CPUus = float64(t1-t0) * 1e6 / 100 / float64(r.Count)
	}
	return r, nil
}

// policyDirs writes the always-allow policy and returns the policy paths by name.
func policyDirs(work string) (map[string]string, error) {
	allow := filepath.Join(work, "allow")
	if err := os.MkdirAll(allow, 0o755); err != nil { //nolint:gosec // holds the always-allow benchmark policy, no secret
		return nil, err
	}
	rego := "package writ.authz\n\ndecision := {\"allow\": true, \"denials\": []}\n"
	if err := os.WriteFile(filepath.Join(allow, "allow.rego"), []byte(rego), 0o644); err != nil { //nolint:gosec // the always-allow benchmark policy, no secret
		return nil, err
	}
	abs, _ := filepath.Abs("policies")
	return map[string]string{policyShipped: abs, policyAllow: allow}, nil
}
