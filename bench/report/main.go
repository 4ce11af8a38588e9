// Command report runs writ's benchmarks and writes bench/REPORT.md: in-process
// decision, input, identity and adapter costs (go test -bench, pinned to CPU 0),
// and the ext_authz gRPC server under load (`writ serve` pinned to CPU 0,
// bench/load pinned to CPU 1) for four workloads — the same request repeated,
// a new contextId per request, a new token per request, another person's token
// on every check (distinct subjects) — against an always-allow policy and a
// bare ext_authz server answering OK (bench/floor) measured in the same run,
// and writ with its decision cache off on distinct subjects (the cold path).
// The headline is ratios and issue 28's targets, each met or missed; the
// peer's figures (../shared/BENCHMARKS.md) are a reference column.
//
// Run from the repository root (make bench). Environment: DURATION (8s) per
// load run, PASSES (2) interleaved max-throughput passes, ROUNDS (5) rounds of
// the in-process benchmarks, BENCHTIME (1s), RATES ("1000 2000 4000"), SKIP (a
// comma list of inproc, max, rates, rss, profile, sidecar, sidecar-load). The
// sidecar is also measured out of process (sidecarload.go): writ serve on the
// file and the memory store against a bare httputil.ReverseProxy, PASSES
// interleaved passes of DURATION each, with one caller's token and with
// another person's on every request.
//
// With -compare OLD NEW it compares two reports' machine-readable blocks and
// fails on a regression of more than 25% of any headline ratio (make
// bench-check).
//
// With -envoy it runs only writ's Envoy doors under load and writes
// bench/ENVOY.md (make bench-envoy): the ext_authz check, the ext_proc request
// phase, and the ext_proc request and response phases, each with the shipped
// policy and the always-allow baseline, at maximum throughput and at the
// fixed RATES, in one table; it prints it too. DURATION, PASSES (3 here),
// RATES and SKIP (max, rates) apply. About 6 minutes on a 2-core host.
package main

import (
	"crypto/rsa"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	policyShipped = "shipped"
	policyAllow   = "always-allow"
	// policyCold is the shipped policy with the decision cache off: on the
	// distinct-subject workload every cache misses (the cold path).
	policyCold = "shipped-uncached"
	// floorServer is bench/floor, the bare ext_authz server that answers OK.
	floorServer = "floor"

	wlRepeated = "repeated"
	wlNewCtx   = "newctx"
	wlNewToken = "newtoken"
	// wlNewSubject: every check a token of another person (sub u-<i>).
	wlNewSubject = "newsubject"

	// distinct is how many distinct requests the varying workloads hold (and
	// how many the RSS measurement sends).
	distinct = 100000
)

var workloads = []string{wlRepeated, wlNewCtx, wlNewToken, wlNewSubject}

var workloadNames = map[string]string{
	wlRepeated:   "same request repeated",
	wlNewCtx:     "new contextId per request",
	wlNewToken:   "new token per request",
	wlNewSubject: "distinct subject per check",
}

type options struct {
	duration  time.Duration
	passes    int
	rounds    int
	benchtime string
	rates     []int
	skip      map[string]bool
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func main() {
	out := flag.String("out", "bench/REPORT.md", "where to write the report (with -envoy: bench/ENVOY.md)")
	envoy := flag.Bool("envoy", false, "run only the Envoy doors under load (ext_authz, ext_proc) and write bench/ENVOY.md")
	compare := flag.Bool("compare", false, "compare two reports: -compare OLD NEW")
	prepare := flag.String("prepare", "", "only write the binaries, key set, configs and request files to this directory")
	flag.Parse()
	if *prepare != "" {
		if _, err := prepareLoad(*prepare, workloads); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	if *compare {
		if flag.NArg() != 2 {
			fmt.Fprintln(os.Stderr, "usage: report -compare OLD.md NEW.md")
			os.Exit(2)
		}
		os.Exit(compareReports(flag.Arg(0), flag.Arg(1)))
	}
	opt, err := readOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(2)
	}
	if *envoy {
		outSet := false
		flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
		if !outSet {
			*out = "bench/ENVOY.md"
		}
		if os.Getenv("PASSES") == "" {
			// Three passes: a median that one disturbed pass cannot move.
			opt.passes = 3
		}
		r, err := runEnvoy(opt)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		doc := renderEnvoy(r)
		if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil { //nolint:gosec // the report is committed (bench/ENVOY.md): as readable as any file of the repository
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		logf("wrote %s", *out)
		fmt.Print(doc)
		return
	}
	r, err := run(opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(render(r)), 0o644); err != nil { //nolint:gosec // the report is committed (bench/REPORT.md): as readable as any file of the repository
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	logf("wrote %s", *out)
}

func readOptions() (options, error) {
	opt := options{duration: 8 * time.Second, passes: 2, rounds: 5, benchtime: "1s",
		rates: []int{1000, 2000, 4000}, skip: map[string]bool{}}
	var err error
	if v := os.Getenv("DURATION"); v != "" {
		if opt.duration, err = time.ParseDuration(v); err != nil {
			return opt, fmt.Errorf("DURATION: %w", err)
		}
	}
	for name, dst := range map[string]*int{"PASSES": &opt.passes, "ROUNDS": &opt.rounds} {
		if v := os.Getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil || *dst < 1 {
				return opt, fmt.Errorf("%s: want a positive number", name)
			}
		}
	}
	if v := os.Getenv("BENCHTIME"); v != "" {
		opt.benchtime = v
	}
	if v := os.Getenv("RATES"); v != "" {
		opt.rates = nil
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return opt, fmt.Errorf("RATES: %w", err)
			}
			opt.rates = append(opt.rates, n)
		}
	}
	for _, s := range strings.Split(os.Getenv("SKIP"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			opt.skip[s] = true
		}
	}
	return opt, nil
}

// results is everything one run measured.
type results struct {
	opt     options
	machine machine
	inproc  map[string]*benchStat
	// max[policy][workload] holds one result per pass.
	max map[string]map[string][]loadResult
	// rates[policy][workload][rate]
	rates map[string]map[string]map[int]loadResult
	// rss[policy][workload]
	rss     map[string]map[string]rssResult
	profile []profileRow
	// sidecar[target] holds one out-of-process run per pass (sidecarload.go).
	sidecar map[string][]slResult
	// half is the distinct-subject workload at half of writ's measured
	// capacity, on writ and on the floor server (halfRate).
	half    map[string]loadResult
	halfRPS int
	started time.Time
	elapsed time.Duration
}

type rssResult struct {
	Load      loadResult
	RSSMiB    float64
	HeapMiB   float64
	TokenHits float64
	DecHits   float64
	DecMisses float64
}

func run(opt options) (*results, error) {
	r := &results{opt: opt, started: time.Now(), inproc: map[string]*benchStat{},
		max:   map[string]map[string][]loadResult{},
		rates: map[string]map[string]map[int]loadResult{},
		rss:   map[string]map[string]rssResult{}}
	r.machine = machineFacts()
	if !opt.skip["inproc"] {
		if err := runInProc(r); err != nil {
			return nil, err
		}
	}
	if opt.skip["max"] && opt.skip["rates"] && opt.skip["rss"] && opt.skip["profile"] && opt.skip["sidecar-load"] {
		r.elapsed = time.Since(r.started)
		r.machine.end()
		return r, nil
	}
	if err := runLoad(r); err != nil {
		return nil, err
	}
	r.elapsed = time.Since(r.started)
	r.machine.end()
	return r, nil
}

// runLoad prepares the requests and binaries and runs the ext_authz passes.
func runLoad(r *results) error {
	opt := r.opt
	work, err := os.MkdirTemp("", "writ-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	wls := workloads
	if opt.skip["max"] && opt.skip["rates"] && opt.skip["rss"] && opt.skip["profile"] {
		wls = nil // the sidecar alone: no ext_authz request files (nor tokens to mint)
	}
	env, err := prepareLoad(work, wls)
	if err != nil {
		return err
	}
	if !opt.skip["max"] {
		if err := maxPasses(r, env); err != nil {
			return err
		}
	}
	if !opt.skip["rates"] {
		if err := ratePasses(r, env); err != nil {
			return err
		}
		if err := halfRate(r, env); err != nil {
			return err
		}
	}
	if !opt.skip["rss"] {
		if err := rssRuns(r, env); err != nil {
			return err
		}
	}
	if !opt.skip["profile"] {
		if err := profileRun(r, env); err != nil {
			logf("profile: %v", err)
		}
	}
	if !opt.skip["sidecar-load"] {
		if err := sidecarLoad(r, env); err != nil {
			return err
		}
	}
	return nil
}

// prepareLoad builds writ and bench/load into work and writes the key set, the
// configs and the request files of the workloads wls there.
func prepareLoad(work string, wls []string) (*loadEnv, error) {
	cache := filepath.Join("bench", ".cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(work, 0o755); err != nil { //nolint:gosec // no secret goes here (the signing key stays in bench/.cache); -prepare's directory is for running writ and bench/load by hand
		return nil, err
	}
	logf("building writ, bench/load and bench/floor")
	writBin, loadBin, floorBin := filepath.Join(work, "writ"), filepath.Join(work, "load"), filepath.Join(work, "floor")
	for bin, pkg := range map[string]string{writBin: "./cmd/writ", loadBin: "./bench/load", floorBin: "./bench/floor"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	key, err := loadOrCreateKey(cache)
	if err != nil {
		return nil, err
	}
	jwks := filepath.Join(work, "jwks.json")
	if err := writeJWKS(jwks, key); err != nil {
		return nil, err
	}
	tpl, err := template()
	if err != nil {
		return nil, err
	}
	if err := checkTemplate(tpl); err != nil {
		return nil, err
	}
	logf("writing request files")
	reqs := map[string]string{}
	for _, wl := range wls {
		reqs[wl] = filepath.Join(work, wl+".bin")
		n, vary := distinct, newContext
		switch wl {
		case wlRepeated:
			n, vary = 1, nil
		case wlNewToken, wlNewSubject:
			name, claims := "tokens", benchClaims
			if wl == wlNewSubject {
				name, claims = "subjects", subjectClaims
			}
			toks, err := loadOrMintTokens(cache, name, claims, key, distinct)
			if err != nil {
				return nil, err
			}
			vary = newToken(toks)
		}
		if err := writeRequests(reqs[wl], tpl, n, vary); err != nil {
			return nil, err
		}
	}
	pols, err := policyDirs(work)
	if err != nil {
		return nil, err
	}
	configs := map[string]string{}
	pols[policyCold] = pols[policyShipped]
	for name, dir := range pols {
		cacheSize := 10000
		if name == policyCold {
			cacheSize = -1 // the decision cache off
		}
		configs[name] = filepath.Join(work, name+".yaml")
		if err := os.WriteFile(configs[name], []byte(writConfig(dir, jwks, stateDir(work, name), cacheSize)), 0o644); err != nil { //nolint:gosec // a benchmark config, no secret in it
			return nil, err
		}
	}
	return &loadEnv{writ: writBin, load: loadBin, floor: floorBin, work: work, cache: cache, key: key, configs: configs, reqs: reqs}, nil
}

type loadEnv struct {
	writ, load, floor, work, cache string
	key                            *rsa.PrivateKey
	configs, reqs                  map[string]string
}

// start starts writ serve on policy's config, or bench/floor for floorServer.
func (e *loadEnv) start(policy string) (*server, error) {
	log := filepath.Join(e.work, policy+".log")
	if policy == floorServer {
		return startProc(log, []int{grpcPort}, e.floor, "-addr", loopback(grpcPort))
	}
	return startProc(log, []int{grpcPort, extProcPort}, e.writ, "serve", "-config", e.configs[policy])
}

// stateDir holds the lifecycle store of policy's servers in one run. It
// lives as long as the run: the one task the ext_proc answers name is
// created once (and its push notification to the bench request's callback,
// agents.bank.ae, attempted once), not once per server.
func stateDir(work, policy string) string { return filepath.Join(work, policy+"-state") }

// startWarm starts policy's server (start) and warms it (warm); a server that
// fails its warm-up is stopped.
func (e *loadEnv) startWarm(policy string) (*server, error) {
	s, err := e.start(policy)
	if err != nil {
		return nil, err
	}
	if err := e.warm(s); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// warm sends 3,000 repeated checks, as BENCHMARKS.md's runs did before measuring.
func (e *loadEnv) warm(s *server) error { return e.warmDoor(s, doorAuthz) }

// warmDoor sends 3,000 repeated requests through door d, and fails unless
// writ allowed every one: a figure measured on refusals or failures would
// not be the allowed delegation the reports describe.
func (e *loadEnv) warmDoor(s *server, d door) error {
	res, err := s.load(e.load, d, e.reqs[wlRepeated], "-c", "16", "-n", "3000")
	if err != nil {
		return err
	}
	if res.Allowed != res.Count {
		return fmt.Errorf("%s: writ allowed %d of %d bench requests (%d denied, %d failed: %s)",
			d.title, res.Allowed, res.Count, res.Denied, res.Errors, res.FirstErr)
	}
	return nil
}

// maxPasses measures maximum throughput (16 workers) for each policy and
// workload, passes interleaved so that host noise spreads over all of them:
// the floor server (one request: it reads none), writ on always-allow and on
// the shipped policy (every workload), and writ with its decision cache off
// (the distinct-subject workload: every cache missed).
func maxPasses(r *results, e *loadEnv) error {
	d := r.opt.duration.String()
	for pass := range r.opt.passes {
		for _, pol := range []string{floorServer, policyAllow, policyShipped, policyCold} {
			wls := workloads
			switch pol {
			case floorServer:
				wls = []string{wlRepeated}
			case policyCold:
				wls = []string{wlNewSubject}
			}
			s, err := e.startWarm(pol)
			if err != nil {
				return err
			}
			// Each varying workload starts where the last run of this server
			// stopped, so every request it sends is new to the server.
			offset := map[string]int{}
			for _, wl := range wls {
				res, err := s.load(e.load, doorAuthz, e.reqs[wl], "-c", "16", "-duration", d, "-offset", strconv.Itoa(offset[wl]))
				if err != nil {
					s.stop()
					return err
				}
				if wl != wlRepeated {
					offset[wl] += res.Count + 1
				}
				logf("pass %d %-16s %-10s %7.0f checks/s  p50 %.2f ms  p99 %.2f ms  %4.0f µs CPU/check  errors %d denied %d",
					pass+1, pol, wl, res.RPS, res.P50ms, res.P99ms, res.CPUus, res.Errors, res.Denied)
				if r.max[pol] == nil {
					r.max[pol] = map[string][]loadResult{}
				}
				r.max[pol][wl] = append(r.max[pol][wl], res)
			}
			s.stop()
		}
	}
	return nil
}

// halfRate drives the distinct-subject workload at half of the capacity
// maxPasses measured for writ (the shipped policy's median checks/s), on writ
// and then on the floor server, PASSES times interleaved: the tail a user
// meets at a comfortable load, as a ratio to what gRPC alone shows at the
// same rate on this host.
func halfRate(r *results, e *loadEnv) error {
	capacity := r.maxMedian(policyShipped, wlNewSubject).RPS
	if capacity <= 0 {
		return nil
	}
	r.halfRPS = int(capacity / 2)
	r.half = map[string]loadResult{}
	runs := map[string][]loadResult{}
	for range r.opt.passes {
		for _, pol := range []string{policyShipped, floorServer} {
			s, err := e.startWarm(pol)
			if err != nil {
				return err
			}
			res, err := s.load(e.load, doorAuthz, e.reqs[wlNewSubject], "-c", "32", "-rps", strconv.Itoa(r.halfRPS), "-duration", r.opt.duration.String())
			s.stop()
			if err != nil {
				return err
			}
			logf("half capacity %-8s %5d/s → %7.0f/s  p50 %.2f  p99 %.2f  p99.9 %.2f ms", pol, r.halfRPS, res.RPS, res.P50ms, res.P99ms, res.P999ms)
			runs[pol] = append(runs[pol], res)
		}
	}
	for pol, x := range runs {
		r.half[pol] = medianOf(x)
	}
	return nil
}

// ratePasses measures latency at fixed rates (32 workers, as ghz --rps ran):
// every workload on the shipped policy, the repeated request on always-allow.
func ratePasses(r *results, e *loadEnv) error {
	d := r.opt.duration.String()
	for _, pol := range []string{policyAllow, policyShipped} {
		s, err := e.startWarm(pol)
		if err != nil {
			return err
		}
		offset := map[string]int{}
		for _, wl := range workloads {
			if pol == policyAllow && wl != wlRepeated {
				continue
			}
			for _, rate := range r.opt.rates {
				res, err := s.load(e.load, doorAuthz, e.reqs[wl], "-c", "32", "-rps", strconv.Itoa(rate), "-duration", d, "-offset", strconv.Itoa(offset[wl]))
				if err != nil {
					s.stop()
					return err
				}
				if wl != wlRepeated {
					offset[wl] += res.Count + 1
				}
				logf("rate %-12s %-9s %5d/s → %7.0f/s  p50 %.2f  p99 %.2f  p99.9 %.2f ms", pol, wl, rate, res.RPS, res.P50ms, res.P99ms, res.P999ms)
				if r.rates[pol] == nil {
					r.rates[pol] = map[string]map[int]loadResult{}
				}
				if r.rates[pol][wl] == nil {
					r.rates[pol][wl] = map[int]loadResult{}
				}
				r.rates[pol][wl][rate] = res
			}
		}
		s.stop()
	}
	return nil
}

// rssRuns sends 100k requests of each workload to a fresh server and reads its
// resident set size and Go heap afterwards.
func rssRuns(r *results, e *loadEnv) error {
	for _, pol := range []string{policyAllow, policyShipped} {
		for _, wl := range workloads {
			if pol == policyAllow && wl != wlNewToken {
				continue
			}
			s, err := e.start(pol)
			if err != nil {
				return err
			}
			res, err := s.load(e.load, doorAuthz, e.reqs[wl], "-c", "16", "-n", strconv.Itoa(distinct))
			if err != nil {
				s.stop()
				return err
			}
			rr := rssResult{Load: res, RSSMiB: s.rssMiB(), HeapMiB: s.metric("go_memstats_heap_inuse_bytes") / (1 << 20),
				TokenHits: s.metric("writ_token_cache_hits_total"), DecHits: s.metric("writ_decision_cache_hits_total"),
				DecMisses: s.metric("writ_decision_cache_misses_total")}
			logf("rss  %-12s %-9s %d checks: RSS %.1f MiB, heap in use %.1f MiB", pol, wl, res.Count, rr.RSSMiB, rr.HeapMiB)
			if r.rss[pol] == nil {
				r.rss[pol] = map[string]rssResult{}
			}
			r.rss[pol][wl] = rr
			s.stop()
		}
	}
	return nil
}

// profileRun records a CPU profile of the cold path (the shipped policy with
// its decision cache off, every check another subject's new token: every
// cache missed) and sorts its time into the categories of the report.
func profileRun(r *results, e *loadEnv) error {
	s, err := e.start(policyCold)
	if err != nil {
		return err
	}
	defer s.stop()
	if err := e.warm(s); err != nil {
		return err
	}
	d := r.opt.duration
	if d < 5*time.Second {
		d = 5 * time.Second
	}
	prof := filepath.Join(e.work, "cpu.prof")
	var res loadResult
	var lerr error
	if err := s.profile(prof, d, func() {
		res, lerr = s.load(e.load, doorAuthz, e.reqs[wlNewSubject], "-c", "16", "-duration", d.String())
	}); err != nil {
		return err
	}
	if lerr != nil {
		return lerr
	}
	rows, err := categorize(e.writ, prof, res.CPUus)
	if err != nil {
		return err
	}
	r.profile = rows
	return nil
}
