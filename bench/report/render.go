package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
)

// peer holds OPA-Envoy's figures from ../shared/BENCHMARKS.md (2-vCPU VM of this
// kind, server on one core, ghz on the other). They come from another run: the
// peer's source is not on this machine to build (the module proxy does not
// serve opa-envoy-plugin), so they are a reference column, never a divisor of
// the guarded ratios. The distinct-subject row takes the new-token figures of
// the same table: the peer caches nothing, so every workload costs it alike
// (BENCHMARKS.md's side-by-side run, on a host 1.5–2× slower for every server,
// gave it 1.27–1.55 ms per distinct-subject check); its RSS after 100k distinct
// subjects, 57 MiB, is from that run.
var peer = struct {
	maxLo, maxHi map[string]float64 // checks/s
	cpuLo, cpuHi map[string]float64 // ms per check
	rss          map[string]float64 // MiB after 100k
	allowLo      float64            // OPA-Envoy plugin, always-allow policy, checks/s
	allowHi      float64
}{
	maxLo:   map[string]float64{wlRepeated: 1000, wlNewCtx: 1200, wlNewToken: 1200, wlNewSubject: 1200},
	maxHi:   map[string]float64{wlRepeated: 1400, wlNewCtx: 1300, wlNewToken: 1500, wlNewSubject: 1500},
	cpuLo:   map[string]float64{wlRepeated: 0.69, wlNewCtx: 0.67, wlNewToken: 0.67, wlNewSubject: 0.67},
	cpuHi:   map[string]float64{wlRepeated: 0.95, wlNewCtx: 0.83, wlNewToken: 0.86, wlNewSubject: 0.86},
	rss:     map[string]float64{wlRepeated: 53, wlNewCtx: 53, wlNewToken: 51, wlNewSubject: 57},
	allowLo: 4600, allowHi: 6200,
}

// The targets of issue 28 (one core for writ, ratios in one run): checks/s
// as a multiple of the peer's, and the peer's CPU per check as a multiple of
// writ's (≤ 0.3× its CPU is ≥ 3.33× here).
var (
	targetVsPeer    = map[string]float64{wlRepeated: 5, wlNewCtx: 5, wlNewToken: 2, wlNewSubject: 3}
	targetCPUVsPeer = map[string]float64{wlRepeated: 5, wlNewCtx: 5, wlNewToken: 2, wlNewSubject: 1 / 0.3}
)

const (
	targetMissUs      = 40.0 // µs, in process
	targetHitUs       = 2.0  // µs, in process
	targetSidecarFile = 0.70 // of a bare ReverseProxy's requests/s, out of process
	targetSidecarMem  = 0.80
	targetHalfP99     = 3.0 // p99 at half capacity, as a multiple of the floor server's at that rate
	targetCold        = 2.0 // cold CPU per check, as a multiple of (floor + one RS256 verification)
)

func (r *results) maxMedian(pol, wl string) loadResult { return medianOf(r.max[pol][wl]) }

// medianOf is one result of several passes: the median of each figure, and
// the errors and denials of all passes.
func medianOf(runs []loadResult) loadResult {
	if len(runs) == 0 {
		return loadResult{}
	}
	var rps, cpu, p50, p99, p999 []float64
	for _, x := range runs {
		rps, cpu, p50, p99, p999 = append(rps, x.RPS), append(cpu, x.CPUus), append(p50, x.P50ms), append(p99, x.P99ms), append(p999, x.P999ms)
	}
	out := runs[0]
	out.RPS, out.CPUus, out.P50ms, out.P99ms, out.P999ms = median(rps), median(cpu), median(p50), median(p99), median(p999)
	for _, x := range runs[1:] {
		out.Count += x.Count
		out.Allowed += x.Allowed
		out.Errors += x.Errors
		out.Denied += x.Denied
	}
	return out
}

func peerMid(wl string) float64 { return (peer.maxLo[wl] + peer.maxHi[wl]) / 2 }

// headline computes the guarded ratios (higher is better) and the reference
// ones.
func (r *results) headline() (guarded, reference map[string]float64) {
	guarded, reference = map[string]float64{}, map[string]float64{}
	put := func(m map[string]float64, k string, v float64) {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			m[k] = round(v, 3)
		}
	}
	for _, wl := range workloads {
		w, a := r.maxMedian(policyShipped, wl), r.maxMedian(policyAllow, wl)
		// Server CPU per check varies less from run to run than checks/s (which
		// also depends on the load client and on the host's scheduling): it is
		// what the guard compares; the throughput ratio is for reading.
		if a.CPUus > 0 && w.CPUus > 0 {
			put(guarded, "cpu."+wl+".always_allow_over_writ", a.CPUus/w.CPUus)
		}
		if a.RPS > 0 {
			put(reference, "max."+wl+".vs_always_allow", w.RPS/a.RPS)
		}
		put(reference, "max."+wl+".vs_peer_mid", w.RPS/peerMid(wl))
		if w.CPUus > 0 {
			put(reference, "cpu."+wl+".peer_mid_over_writ", (peer.cpuLo[wl]+peer.cpuHi[wl])/2*1000/w.CPUus)
		}
	}
	allow := r.inproc["authz.EvaluateAlwaysAllow"].median("ns/op")
	if miss := r.inproc["authz.DecideMiss"].median("ns/op"); miss > 0 {
		put(guarded, "inproc.decide_miss.vs_always_allow_eval", allow/miss)
	}
	if hit := r.inproc["authz.DecideHit"].median("ns/op"); hit > 0 {
		put(guarded, "inproc.decide_hit.vs_always_allow_eval", allow/hit)
	}
	if rss := r.rss[policyShipped][wlNewToken].RSSMiB; rss > 0 {
		put(guarded, "rss.newtoken.peer_over_writ", peer.rss[wlNewToken]/rss)
	}
	if bare := r.inproc["bench.Sidecar/parallel/bare-proxy"].median("ns/op"); bare > 0 {
		if hit := r.inproc["bench.Sidecar/parallel/allow-hit"].median("ns/op"); hit > 0 {
			put(guarded, "sidecar.allow_hit.vs_bare_proxy", bare/hit)
		}
	}
	for k, v := range slRatios(r) {
		put(reference, k, v)
	}
	if f, w := r.half[floorServer].P99ms, r.half[policyShipped].P99ms; f > 0 && w > 0 {
		put(reference, "half_capacity.newsubject.floor_p99_over_writ", f/w)
	}
	if cold, at := r.coldPath(); cold > 0 && at > 0 {
		put(guarded, "cold.newsubject.floor_plus_rs256_over_writ", at/cold)
	}
	return guarded, reference
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func render(r *results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.machine
	p("# writ benchmark report\n\n")
	p("Generated by `make bench` (`go run ./bench/report`); do not edit by hand. ")
	p("The host is noisy (±30%%): every ratio below divides figures measured back to back in this run, ")
	p("as medians of interleaved runs. The peer's figures (OPA-Envoy, from `../shared/BENCHMARKS.md`, ")
	p("another run on a machine of this kind) are a reference column only.\n\n")
	renderMachine(p, m, fmt.Sprintf("DURATION=%s PASSES=%d ROUNDS=%d BENCHTIME=%s; run took %s", r.opt.duration, r.opt.passes, r.opt.rounds, r.opt.benchtime, r.elapsed.Round(1e9)))

	renderHeadline(r, p)
	renderMax(r, p)
	renderRates(r, p)
	renderRSS(r, p)
	renderInProc(r, p)
	renderParse(r, p)
	renderSidecar(r, p)
	renderSidecarLoad(r, p)
	renderProfile(r, p)
	if notes, err := os.ReadFile("bench/NOTES.md"); err == nil {
		p("## Notes (bench/NOTES.md)\n\n%s\n", strings.TrimSpace(string(notes)))
		p("\n")
	}
	guarded, reference := r.headline()
	raw, _ := json.MarshalIndent(map[string]any{"guarded": guarded, "reference": reference}, "", "  ")
	p("## Machine-readable headline\n\n")
	p("`make bench-check` runs the benchmarks again and fails when a `guarded` ratio (higher is better) ")
	p("falls more than 25%% below this block's value. `reference` ratios divide by figures from other runs ")
	p("and are not guarded.\n\n")
	p("<!-- bench-check:begin -->\n```json\n%s\n```\n<!-- bench-check:end -->\n", raw)
	return b.String()
}

type printer func(string, ...any)

// renderMachine is the table of machine facts a generated report opens with.
func renderMachine(p printer, m machine, settings string) {
	p("| machine | |\n|---|---|\n")
	p("| date (UTC) | %s |\n| CPU | %s |\n| cores | %d (writ pinned to CPU 0, the load client to CPU 1) |\n", m.Date.Format("2006-01-02 15:04"), m.CPU, m.Cores)
	p("| kernel | %s |\n| Go | %s |\n| OPA | %s (embedded) |\n| commit | %s |\n", m.Kernel, m.Go, m.OPA, m.Commit)
	p("| host load average (1, 5, 15 min) | %s at the start, %s at the end (2 cores; other work on the host slows every figure) |\n", m.LoadStart, m.LoadEnd)
	if m.Steal >= 0 {
		p("| CPU steal during the run | %.1f%% of the host's CPU time went to other guests of the hypervisor |\n", 100*m.Steal)
	}
	p("| settings | %s |\n\n", settings)
}

// missedBy says by how much v misses a target (higher is better when up).
func missedBy(v, target float64, up bool) string {
	if v == 0 {
		return "not measured"
	}
	if up {
		if v >= target {
			return "met"
		}
		return fmt.Sprintf("**missed** by %.0f%%", (target-v)/target*100)
	}
	if v <= target {
		return "met"
	}
	return fmt.Sprintf("**missed** by %.0f%%", (v-target)/target*100)
}

// coldPath is writ's CPU per check with every cache missed (decision cache
// off, another subject's new token each check) and what it would be at its
// floor: the bare gRPC server's CPU per check in the same run plus one RS256
// verification in process (µs; 0 when not measured).
func (r *results) coldPath() (cold, floor float64) {
	cold = r.maxMedian(policyCold, wlNewSubject).CPUus
	f := r.maxMedian(floorServer, wlRepeated).CPUus
	rs := r.inproc["identity.RS256Verify"].median("ns/op") / 1000
	if f > 0 && rs > 0 {
		floor = f + rs
	}
	return cold, floor
}

func renderHeadline(r *results, p printer) {
	p("## Headline\n\n")
	p("ext_authz gRPC, writ on one core, maximum throughput (16 workers on one HTTP/2 connection). Two ")
	p("comparisons with OPA-Envoy's figures (their ranges' middle): checks/s, which on this shared host ")
	p("depends on how much of CPU 0 the other processes leave writ (load average in the table above), and ")
	p("server CPU per check, which they disturb far less. `vs always-allow` divides by writ with an ")
	p("always-allow policy measured in the same run: the cost floor of gRPC, parsing and identity. ")
	p("The distinct-subject row is the normal case for an agent platform: every check from another person.\n\n")
	p("| workload | writ checks/s | vs peer (checks/s) | writ CPU µs/check | peer CPU µs/check | vs peer (CPU/check) | always-allow: checks/s, CPU µs/check | vs always-allow (CPU/check) | target vs peer | |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, wl := range workloads {
		w, a := r.maxMedian(policyShipped, wl), r.maxMedian(policyAllow, wl)
		if w.RPS == 0 {
			continue
		}
		byRPS := w.RPS / peerMid(wl)
		peerCPU := (peer.cpuLo[wl] + peer.cpuHi[wl]) / 2 * 1000
		byCPU := 0.0
		if w.CPUus > 0 {
			byCPU = peerCPU / w.CPUus
		}
		vsAllow := ""
		if w.CPUus > 0 && a.CPUus > 0 {
			vsAllow = fmt.Sprintf("%.2f×", a.CPUus/w.CPUus)
		}
		target := fmt.Sprintf("≥ %.0f× checks/s, CPU ≤ %.2f×", targetVsPeer[wl], 1/targetCPUVsPeer[wl])
		verdict := fmt.Sprintf("by CPU/check: %s; by checks/s: %s", missedBy(byCPU, targetCPUVsPeer[wl], true), missedBy(byRPS, targetVsPeer[wl], true))
		p("| %s | %.0f | %.2f× (%.2f–%.2f×) | %.0f | %.0f–%.0f | %.2f× | %.0f, %.0f | %s | %s | %s |\n", workloadNames[wl],
			w.RPS, byRPS, w.RPS/peer.maxHi[wl], w.RPS/peer.maxLo[wl], w.CPUus, peer.cpuLo[wl]*1000, peer.cpuHi[wl]*1000, byCPU,
			a.RPS, a.CPUus, vsAllow, target, verdict)
	}
	if f := r.maxMedian(floorServer, wlRepeated); f.RPS > 0 {
		p("| floor: bench/floor, a bare ext_authz server answering OK | %.0f | | %.0f | | | | | | |\n", f.RPS, f.CPUus)
	}
	if c := r.maxMedian(policyCold, wlNewSubject); c.RPS > 0 {
		p("| distinct subject per check, decision cache off (every cache missed) | %.0f | | %.0f | | | | | | |\n", c.RPS, c.CPUus)
	}
	renderTargets(r, p)
}

// renderTargets is issue 28's targets, each with its figure from this run.
func renderTargets(r *results, p printer) {
	p("\n### Targets\n\n| target | measured | |\n|---|---|---|\n")
	sl := slRatios(r)
	for _, row := range []struct {
		target, what string
		want         float64
	}{
		{"file", "default file store, one caller's token", targetSidecarFile},
		{"file-subjects", "default file store, another person's token on every request", targetSidecarFile},
		{"memory", "memory store, one caller's token", targetSidecarMem},
		{"memory-subjects", "memory store, another person's token on every request", targetSidecarMem},
	} {
		if v, ok := sl["sidecar.process."+row.target+".vs_bare_proxy"]; ok {
			p("| sidecar out of process, allowed sends at %d connections, %s: ≥ %.1f× a bare `httputil.ReverseProxy`'s req/s | %.2f× | %s |\n",
				slConns, row.what, row.want, v, missedBy(v, row.want, true))
		}
	}
	if w := r.maxMedian(policyShipped, wlNewSubject); w.RPS > 0 {
		byRPS, byCPU := w.RPS/peerMid(wlNewSubject), 0.0
		if w.CPUus > 0 {
			byCPU = w.CPUus / ((peer.cpuLo[wlNewSubject] + peer.cpuHi[wlNewSubject]) / 2 * 1000)
		}
		p("| ext_authz, distinct subject per check: ≥ %.0f× the peer's checks/s | %.2f× | %s |\n", targetVsPeer[wlNewSubject], byRPS, missedBy(byRPS, targetVsPeer[wlNewSubject], true))
		p("| ext_authz, distinct subject per check: ≤ %.1f× the peer's CPU per check | %.2f× | %s |\n", 1/targetCPUVsPeer[wlNewSubject], byCPU, missedBy(byCPU, 1/targetCPUVsPeer[wlNewSubject], false))
	}
	for _, wl := range []string{wlRepeated, wlNewCtx} {
		if w := r.maxMedian(policyShipped, wl); w.RPS > 0 {
			byRPS := w.RPS / peerMid(wl)
			p("| ext_authz, %s: ≥ %.0f× the peer's checks/s | %.2f× | %s |\n", workloadNames[wl], targetVsPeer[wl], byRPS, missedBy(byRPS, targetVsPeer[wl], true))
		}
	}
	if w, f := r.half[policyShipped], r.half[floorServer]; w.P99ms > 0 && f.P99ms > 0 {
		p("| p99 at half of writ's capacity (%d/s of distinct subjects; writ %.0f/s achieved, floor %.0f/s) ≤ %.0f× the floor server's p99 at that rate | writ %.2f ms, floor %.2f ms: %.2f× | %s |\n",
			r.halfRPS, w.RPS, f.RPS, targetHalfP99, w.P99ms, f.P99ms, w.P99ms/f.P99ms, missedBy(w.P99ms/f.P99ms, targetHalfP99, false))
	}
	if cold, at := r.coldPath(); cold > 0 && at > 0 {
		p("| cold path (every cache missed): CPU per check ≤ %.0f× (floor server + one RS256 verification) | %.0f µs vs %.0f µs: %.2f× | %s |\n",
			targetCold, cold, at, cold/at, missedBy(cold/at, targetCold, false))
	}
	if miss := r.inproc["authz.DecideMiss"].median("ns/op"); miss > 0 {
		p("| in process, decision cache miss ≤ %.0f µs | %.1f µs | %s |\n", targetMissUs, miss/1000, missedBy(miss/1000, targetMissUs, false))
	}
	if hit := r.inproc["authz.DecideHit"].median("ns/op"); hit > 0 {
		p("| in process, decision cache hit ≤ %.0f µs | %.2f µs | %s |\n", targetHitUs, hit/1000, missedBy(hit/1000, targetHitUs, false))
	}
	if x, ok := r.rss[policyShipped][wlNewSubject]; ok {
		p("| RSS after 100k distinct subjects ≤ the peer's (%.0f MiB) | %.1f MiB | %s |\n", peer.rss[wlNewSubject], x.RSSMiB, missedBy(x.RSSMiB, peer.rss[wlNewSubject], false))
	}
	p("\n")
}

func renderMax(r *results, p printer) {
	if len(r.max) == 0 {
		return
	}
	p("## ext_authz: maximum throughput, per pass\n\n")
	p("`writ serve` (decision cache and token cache at their defaults, decision log off) pinned to CPU 0; ")
	p("`bench/load` pinned to CPU 1 sends pre-built CheckRequests from 16 workers on one connection for %s per run, ", r.opt.duration)
	p("after 3,000 warm-up checks. Passes alternate the policies. The varying workloads send requests the server has not seen ")
	p("(%dk distinct contextIds; %dk tokens minted ahead with a bench key, same claims, new `jti`/`iat`; %dk tokens of %dk distinct subjects). ", distinct/1000, distinct/1000, distinct/1000, distinct/1000)
	p("`floor` is bench/floor (the bare server answering OK, the request unread) and `%s` writ with its decision cache off; both in each pass. ", policyCold)
	p("Peer CPU per check: repeated %.2f–%.2f ms, new context %.2f–%.2f ms, new token %.2f–%.2f ms.\n\n",
		peer.cpuLo[wlRepeated], peer.cpuHi[wlRepeated], peer.cpuLo[wlNewCtx], peer.cpuHi[wlNewCtx], peer.cpuLo[wlNewToken], peer.cpuHi[wlNewToken])
	p("| pass | policy | workload | checks/s | p50 ms | p99 ms | server CPU µs/check | errors | denied |\n|---|---|---|---|---|---|---|---|---|\n")
	for pass := range r.opt.passes {
		for _, pol := range []string{floorServer, policyAllow, policyShipped, policyCold} {
			for _, wl := range workloads {
				runs := r.max[pol][wl]
				if pass >= len(runs) {
					continue
				}
				x := runs[pass]
				p("| %d | %s | %s | %.0f | %.2f | %.2f | %.0f | %d | %d |\n", pass+1, pol, workloadNames[wl], x.RPS, x.P50ms, x.P99ms, x.CPUus, x.Errors, x.Denied)
			}
		}
	}
	p("\n")
}

func renderRates(r *results, p printer) {
	if len(r.rates) == 0 {
		return
	}
	p("## ext_authz: latency at fixed rates\n\n")
	p("32 workers sharing a fixed schedule (as `ghz -c 32 --rps R`); latency from send to answer. A server that cannot keep ")
	p("up shows as an achieved rate below the target. Peer: OPA-Envoy with the delegation policy saturated at 0.8–1.1k/s ")
	p("(p99 59–74 ms) when driven at 1k, 2k and 4k/s; p99 10–13 ms at 500/s.\n\n")
	p("| policy | workload | target/s | achieved/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pol := range []string{policyShipped, policyAllow} {
		for _, wl := range workloads {
			for _, rate := range r.opt.rates {
				x, ok := r.rates[pol][wl][rate]
				if !ok {
					continue
				}
				p("| %s | %s | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f | %d |\n", pol, workloadNames[wl], rate, x.RPS, x.P50ms, x.P90ms, x.P99ms, x.P999ms, x.MaxMs, x.Errors)
			}
		}
	}
	for _, pol := range []string{policyShipped, floorServer} {
		if x, ok := r.half[pol]; ok {
			p("| %s | %s, at half of writ's capacity (medians of %d passes) | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.1f | %d |\n", pol, workloadNames[wlNewSubject], r.opt.passes, r.halfRPS, x.RPS, x.P50ms, x.P90ms, x.P99ms, x.P999ms, x.MaxMs, x.Errors)
		}
	}
	p("\n")
}

func renderRSS(r *results, p printer) {
	if len(r.rss) == 0 && r.inproc["authz.CacheBytes"] == nil && r.inproc["identity.CacheBytes"] == nil {
		return
	}
	p("## Memory\n\n")
	if len(r.rss) > 0 {
		p("A fresh `writ serve` receives %dk checks of the workload (16 workers), then its VmRSS and Go heap in use ", distinct/1000)
		p("(`go_memstats_heap_inuse_bytes`) are read.\n\n")
		p("| policy | workload | RSS MiB | heap in use MiB | peer RSS MiB | decision cache hits / misses | token cache hits |\n|---|---|---|---|---|---|---|\n")
		for _, pol := range []string{policyShipped, policyAllow} {
			for _, wl := range workloads {
				x, ok := r.rss[pol][wl]
				if !ok {
					continue
				}
				p("| %s | %s | %.1f | %.1f | %.0f | %.0f / %.0f | %.0f |\n", pol, workloadNames[wl], x.RSSMiB, x.HeapMiB, peer.rss[wl], x.DecHits, x.DecMisses, x.TokenHits)
			}
		}
		p("\n")
	}
	var rows []string
	for _, key := range []string{"authz.CacheBytes", "identity.CacheBytes"} {
		st := r.inproc[key]
		if st == nil {
			continue
		}
		units := make([]string, 0, len(st.Values))
		for u := range st.Values {
			if strings.HasPrefix(u, "B/") && u != "B/op" {
				units = append(units, u)
			}
		}
		sort.Strings(units)
		for _, u := range units {
			rows = append(rows, fmt.Sprintf("| %s (`%s`) | %.0f |\n", strings.ReplaceAll(strings.TrimPrefix(u, "B/"), "-", " "), key, st.median(u)))
		}
	}
	if len(rows) > 0 {
		p("Heap held per cache entry (growth of the live heap over thousands of entries, in process):\n\n| entry | bytes |\n|---|---|\n")
		p("%s\n", strings.Join(rows, ""))
	}
}

// inprocRows are the in-process benchmarks of the report, in order.
var inprocRows = []struct{ key, what string }{
	{"authz.EvaluateAlwaysAllow", "always-allow policy, evaluation alone (baseline)"},
	{"authz.Evaluate", "shipped policy, whole policy on the whole input, evaluation alone"},
	{"authz.EvaluatePartial", "shipped policy, the target's and operation's residual on the read input, evaluation alone"},
	{"authz.DecideMiss", "decision, cache miss (input, key, evaluation; a new callback URL each time)"},
	{"authz.DecideNewContext", "decision, a new contextId each time"},
	{"authz.DecideNewToken", "decision, a new token's caller each time (same claims but jti, iat)"},
	{"authz.DecideNewSubject", "decision, another subject each time, a send that names no task (its residual reads no subject: a hit)"},
	{"authz.DecideNewSubjectReply", "decision, another subject each time, a reply to a task (the ownership check reads the subject: a miss)"},
	{"authz.DecideHit", "decision, cache hit (input, key, lookup)"},
	{"authz.BuildInput", "input build (BuildInput and its OPA value)"},
	{"identity.RS256Verify", "RS256 signature check alone (crypto/rsa, key parsed): the cold path's floor"},
	{"identity.IdentifyUncached", "JWT verify, cold (RS256)"},
	{"identity.IdentifyCached", "JWT verify, cached"},
	{"extauthz.Check", "ext_authz Check in process, no gRPC (decision cache warm)"},
	{"extauthz.CheckNewSubject", "ext_authz Check in process, no gRPC, another subject's new token each time (RS256 verified; the decision a hit)"},
}

func renderInProc(r *results, p printer) {
	if len(r.inproc) == 0 {
		return
	}
	p("## In process\n\n")
	p("`go test -bench` pinned to CPU 0, %d interleaved rounds, medians. Peer in process (OPA v1.22.3, one core): reference ", r.opt.rounds)
	p("policy with the input as `ast.Value` 351k–560k ns/op, with OPA's JWT cache 227k–258k, always-allow 8.2k–9.5k, RS256 alone 111k–125k.\n\n")
	allow := r.inproc["authz.EvaluateAlwaysAllow"].median("ns/op")
	p("| benchmark | ns/op | B/op | allocs/op | vs always-allow eval |\n|---|---|---|---|---|\n")
	for _, row := range inprocRows {
		st := r.inproc[row.key]
		if st == nil {
			continue
		}
		ns := st.median("ns/op")
		ratio := ""
		if allow > 0 && strings.HasPrefix(row.key, "authz.") {
			ratio = fmt.Sprintf("%.2f×", ns/allow)
		}
		p("| %s | %.0f | %.0f | %.0f | %s |\n", row.what, ns, st.median("B/op"), st.median("allocs/op"), ratio)
	}
	p("\n")
}

// benchmarks are the names of the in-process benchmarks under prefix, sorted.
func (r *results) benchmarks(prefix string) []string {
	var names []string
	for k := range r.inproc {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

func renderParse(r *results, p printer) {
	names := r.benchmarks("bench.Parse/")
	if len(names) == 0 {
		return
	}
	p("## Adapter parse per operation\n\n")
	p("The adapters' exported `Parse` on the wire fixtures of `testdata/` (real SDK bytes), in process.\n\n")
	p("| fixture | ns/op | B/op | allocs/op |\n|---|---|---|---|\n")
	for _, k := range names {
		st := r.inproc[k]
		p("| %s | %.0f | %.0f | %.0f |\n", strings.TrimPrefix(k, "bench.Parse/"), st.median("ns/op"), st.median("B/op"), st.median("allocs/op"))
	}
	p("\n")
}

func renderSidecar(r *results, p printer) {
	names := r.benchmarks("bench.Sidecar/")
	if len(names) == 0 {
		return
	}
	p("## Sidecar vs `httputil.ReverseProxy`\n\n")
	p("In process (`bench/sidecar_test.go`): the sidecar built as proxy's tests build it, and a bare ")
	p("`httputil.ReverseProxy`, each in front of the same fast upstream on loopback, driven over HTTP/1.1 keep-alive ")
	p("connections by a client in the same process, all on CPU 0. `parallel` runs 16 concurrent clients (ns/op is the ")
	p("inverse of throughput); `serial` one request at a time (ns/op is the round trip). Streams (SendStreamingMessage, ")
	p("four SSE events) compare with the bare proxy streaming the same answer.\n\n")
	p("| path | ns/op | vs bare proxy (throughput) | added µs |\n|---|---|---|---|\n")
	for _, k := range names {
		st := r.inproc[k]
		mode, path, _ := strings.Cut(strings.TrimPrefix(k, "bench.Sidecar/"), "/")
		base := "bare-proxy"
		if strings.Contains(path, "stream") {
			base = "bare-proxy-stream"
		}
		bare := r.inproc["bench.Sidecar/"+mode+"/"+base].median("ns/op")
		ns := st.median("ns/op")
		ratio, added := "", ""
		if bare > 0 {
			ratio = fmt.Sprintf("%.2f×", bare/ns)
			added = fmt.Sprintf("%.0f", (ns-bare)/1000)
		}
		p("| %s | %.0f | %s | %s |\n", strings.TrimPrefix(k, "bench.Sidecar/"), ns, ratio, added)
	}
	p("\n")
}

func renderProfile(r *results, p printer) {
	if len(r.profile) == 0 {
		return
	}
	p("## Where the time goes: the cold path\n\n")
	p("CPU profile of `writ serve` (admin pprof) with the shipped policy and its decision cache off during a ")
	p("maximum-throughput run of the distinct-subject workload: every check misses every cache. ")
	p("Shares are cumulative (a category includes what it calls), so they overlap and do not sum to 100%%. ")
	if cold, at := r.coldPath(); at > 0 {
		p("For scale, in this run: the floor server %.0f µs per check, one RS256 check alone %.0f µs, writ's cold path %.0f µs. ",
			r.maxMedian(floorServer, wlRepeated).CPUus, r.inproc["identity.RS256Verify"].median("ns/op")/1000, cold)
	}
	p("\n\n")
	p("| category | share of CPU | µs per check |\n|---|---|---|\n")
	for _, row := range r.profile {
		p("| %s | %.1f%% | %.0f |\n", row.Category, row.Share*100, row.PerCheck)
	}
	p("\n")
}
