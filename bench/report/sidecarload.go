package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The sidecar out of process: `writ serve` (CPU 0) on the default file store
// and on the memory store, and a bare httputil.ReverseProxy (CPU 0), each in
// front of the same fast agent, driven over TCP by bench/sidecarload (CPU 1,
// with the agent) at 32 connections, interleaved in each pass.

const (
	slUpstreamPort, slBarePort, slWritPort, slAdminPort = 19201, 19202, 19203, 19204
	slConns                                             = 32
)

// slTargets are the rows, in the order each pass runs them: the bare proxy,
// writ on either store with one caller's token on every request, and on
// either store with another person's token on every request (-subjects: the
// normal case, the token cache missed each time).
var slTargets = []string{"bare-proxy", "file", "memory", "file-subjects", "memory-subjects"}

// slStore is the store a target's writ runs on.
func slStore(target string) string { return strings.TrimSuffix(target, "-subjects") }

// slResult is one load run: bench/sidecarload's summary and the server's CPU.
type slResult struct {
	RPS   float64 `json:"rps"`
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	Count int     `json:"count"`
	Err   int     `json:"errors"`
	CPUus float64 `json:"-"`
}

// sidecarLoad runs the passes into r.sidecar[target].
func sidecarLoad(r *results, env *loadEnv) error {
	bin := filepath.Join(env.work, "sidecarload")
	if out, err := exec.Command("go", "build", "-o", bin, "./bench/sidecarload").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./bench/sidecarload: %w\n%s", err, out)
	}
	for _, port := range []int{slUpstreamPort, slBarePort, slWritPort, slAdminPort} {
		if listening(port) {
			return fmt.Errorf("port %d is in use", port)
		}
	}
	up, err := slStart(filepath.Join(env.work, "sl-upstream.log"), "1", bin, "upstream", "-listen", loopback(slUpstreamPort))
	if err != nil {
		return err
	}
	defer slStop(up)
	bare, err := slStart(filepath.Join(env.work, "sl-bare.log"), "0", bin, "bare", "-listen", loopback(slBarePort),
		"-upstream", "http://"+loopback(slUpstreamPort))
	if err != nil {
		return err
	}
	defer slStop(bare)
	configs := map[string]string{}
	for _, kind := range []string{"file", "memory"} {
		configs[kind] = filepath.Join(env.work, "sl-"+kind+".yaml")
		if err := os.WriteFile(configs[kind], []byte(slConfig(env, kind)), 0o644); err != nil { //nolint:gosec // a benchmark config, no secret in it
			return err
		}
	}
	// Minted once, as prepareLoad mints them (kept in the cache directory).
	if _, err := loadOrMintTokens(env.cache, "subjects", subjectClaims, env.key, distinct); err != nil {
		return err
	}
	subjects := tokenFile(env.cache, "subjects", distinct)
	r.sidecar = map[string][]slResult{}
	for pass := range r.opt.passes {
		for _, target := range slTargets {
			logf("sidecar out of process: pass %d, %s", pass+1, target)
			srv := bare
			if target != "bare-proxy" {
				_ = os.RemoveAll(filepath.Join(env.work, "sl-state"))
				srv, err = slStart(filepath.Join(env.work, "sl-"+target+".log"), "0", env.writ, "serve", "-config", configs[slStore(target)])
				if err != nil {
					return err
				}
			}
			tokens := ""
			if strings.HasSuffix(target, "-subjects") {
				tokens = subjects
			}
			res, err := slRun(bin, srv, slURL(target), tokens, r.opt.duration)
			if srv != bare {
				slStop(srv)
			}
			if err != nil {
				return err
			}
			r.sidecar[target] = append(r.sidecar[target], res)
		}
	}
	return nil
}

func slURL(target string) string {
	if target == "bare-proxy" {
		return "http://" + loopback(slBarePort)
	}
	return "http://" + loopback(slWritPort)
}

// slConfig is writ serve's config for the bench agent on the given store,
// otherwise the defaults (push delivery by writ on, decision log off as in
// the other load runs).
func slConfig(env *loadEnv, kind string) string {
	store := "{kind: memory}"
	if kind == "file" {
		store = fmt.Sprintf("{kind: file, path: %s}", filepath.Join(env.work, "sl-state", "writ.db"))
	}
	pols, _ := filepath.Abs("policies")
	return fmt.Sprintf(`listen: %s
admin: %s
policies: [%s]
decision_log: {output: "off"}
store: %s
identity:
  jwt: [{issuer: "https://idp.bank.ae", audiences: [a2a-gateway], jwks_file: %s}]
agents:
  - name: sanctions-screening-agent
    route: /
    upstream: http://%s
    public_url: https://sanctions-screening-agent.agents.bank.ae
    owner: group-compliance
    tenants: [wholesale, retail]
    max_data_classification: restricted
    security_schemes: [oauth2]
    skills: [{id: screen, tags: [sanctions, compliance, screening]}]
`, loopback(slWritPort), loopback(slAdminPort), pols, store, filepath.Join(env.work, "jwks.json"), loopback(slUpstreamPort))
}

// slStart starts argv pinned to cpu and waits until it listens on the port
// its flags or config name.
func slStart(logPath, cpu string, argv ...string) (*server, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("taskset", append([]string{"-c", cpu}, argv...)...) //nolint:gosec // the binaries this report built, with its own flags
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	s := &server{cmd: cmd, log: logPath, exited: exited}
	port := slUpstreamPort
	switch argv[1] {
	case "bare":
		port = slBarePort
	case "serve":
		port = slWritPort
	}
	for range 300 {
		select {
		case <-exited:
			raw, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited:\n%s", argv[0], raw)
		default:
		}
		if c, err := net.Dial("tcp", loopback(port)); err == nil {
			c.Close()
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	slStop(s)
	return nil, fmt.Errorf("%s did not listen on %d", argv[0], port)
}

func slStop(s *server) {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// slRun drives url for d from CPU 1 (with tokens, a file of bearer tokens
// taken in turn) and reads srv's CPU time around it.
func slRun(bin string, srv *server, url, tokens string, d time.Duration) (slResult, error) {
	t0 := srv.cpuTicks()
	out, err := exec.Command("taskset", "-c", "1", bin, "load", "-url", url, "-request", "bench/request_allow.json", //nolint:gosec // the binary this report built, with its own flags
		"-tokens", tokens, "-c", fmt.Sprint(slConns), "-duration", d.String()).Output()
	t1 := srv.cpuTicks()
	if err != nil {
		return slResult{}, fmt.Errorf("sidecarload load %s: %w", url, err)
	}
	var res slResult
	if err := json.Unmarshal(out, &res); err != nil {
		return slResult{}, fmt.Errorf("sidecarload output %q: %w", out, err)
	}
	if res.Err > 0 {
		return slResult{}, fmt.Errorf("sidecarload %s: %d failed requests: %s", url, res.Err, out)
	}
	if res.Count > 0 {
		res.CPUus = float64(t1-t0) * 1e6 / 100 / float64(res.Count)
	}
	return res, nil
}

// renderSidecarLoad is the out-of-process table: medians over the passes,
// each ratio taken within its own pass.
func renderSidecarLoad(r *results, p printer) {
	bare := r.sidecar["bare-proxy"]
	if len(bare) == 0 {
		return
	}
	p("## Sidecar out of process\n\n")
	p("`writ serve` on the default file store and on the memory store, and a bare `httputil.ReverseProxy` ")
	p("(`bench/sidecarload bare`), each pinned to CPU 0 in front of the same fast agent, driven over TCP by ")
	p("`bench/sidecarload load` (CPU 1, with the agent) at %d HTTP/1.1 keep-alive connections, the allowed send of ", slConns)
	p("`bench/request_allow.json` without its push callback (its host does not exist here); the three interleaved in ")
	p("each pass, medians of %d passes of %s, each ratio within its pass. CPU is the server's user+system time per request.\n\n", r.opt.passes, r.opt.duration)
	p("| target | req/s | vs bare proxy | p50 ms | p99 ms | CPU µs/req |\n|---|---|---|---|---|---|\n")
	for _, target := range slTargets {
		runs := r.sidecar[target]
		if len(runs) == 0 {
			continue
		}
		var rps, ratio, p50, p99, cpu []float64
		for i, x := range runs {
			rps, p50, p99, cpu = append(rps, x.RPS), append(p50, x.P50us/1000), append(p99, x.P99us/1000), append(cpu, x.CPUus)
			if i < len(bare) && bare[i].RPS > 0 {
				ratio = append(ratio, x.RPS/bare[i].RPS)
			}
		}
		p("| %s | %.0f | %.2f× | %.1f | %.1f | %.0f |\n", target, median(rps), median(ratio), median(p50), median(p99), median(cpu))
	}
	p("\n")
}

// slRatios are the headline ratios of the out-of-process table.
func slRatios(r *results) map[string]float64 {
	out := map[string]float64{}
	bare := r.sidecar["bare-proxy"]
	for _, target := range slTargets {
		if target == "bare-proxy" {
			continue
		}
		var ratio []float64
		for i, x := range r.sidecar[target] {
			if i < len(bare) && bare[i].RPS > 0 {
				ratio = append(ratio, x.RPS/bare[i].RPS)
			}
		}
		if len(ratio) > 0 {
			out["sidecar.process."+target+".vs_bare_proxy"] = median(ratio)
		}
	}
	return out
}
