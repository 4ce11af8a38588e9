package main

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/bench/loadgen"
)

func res(rps, p99, cpu float64) loadResult {
	return loadResult{Result: loadgen.Result{Count: 100, Allowed: 100, RPS: rps, P50ms: p99 / 4, P99ms: p99, P999ms: p99 * 2}, CPUus: cpu}
}

// TestRenderEnvoy: one table, a max row and a row per rate for each door and
// policy, with the ratios to the same door's baseline and to ext_authz, and
// the headline built from them.
func TestRenderEnvoy(t *testing.T) {
	r := &envoyResults{opt: options{duration: 8 * time.Second, passes: 2, rates: []int{1000, 2000}},
		max: map[string]map[string][]loadResult{}, rates: map[string]map[string]map[int]loadResult{}}
	cpu := map[string]float64{doorAuthz.key: 100, doorProcRequest.key: 150, doorProcBoth.key: 200}
	for _, d := range envoyDoors {
		for _, pol := range []string{policyAllow, policyShipped} {
			k := 1.0
			if pol == policyShipped {
				k = 1.1
			}
			r.addMax(d.key, pol, res(1000/k, 4*k, cpu[d.key]*k*0.9))
			r.addMax(d.key, pol, res(900/k, 6*k, cpu[d.key]*k*1.1))
			r.addMax(d.key, pol, res(800/k, 5*k, cpu[d.key]*k))
			r.addRate(d.key, pol, 1000, res(999, 2*k, 2*cpu[d.key]*k))
			r.addRate(d.key, pol, 2000, res(1500, 8*k, 2*cpu[d.key]*k))
		}
	}
	out := renderEnvoy(r)
	if n := strings.Count(out, "| door | policy | load |"); n != 1 {
		t.Fatalf("%d tables, want one:\n%s", n, out)
	}
	for _, want := range []string{
		// the median of three passes, each pass's calls/s listed
		"| ext_authz check | shipped | max, 16 workers | 818 (909, 818, 727) | 1.38 | 5.50 | 11.00 | 110 | CPU 1.10×, calls/s 0.91× | — | 0 / 0 |",
		"| ext_proc request phase | always-allow | max, 16 workers | 900 (1000, 900, 800) | 1.25 | 5.00 | 10.00 | 150 | baseline | 1.50× | 0 / 0 |",
		"| ext_proc request + response | shipped | 2000/s, 32 workers | 1500 | 2.20 | 8.80 | 17.60 | 440 | CPU 1.10×, p99 1.10× | 2.00× |",
		// the headline
		"an ext_authz check costs 110 µs): request phase 1.50× (165 µs), request + response 2.00× (220 µs). With the always-allow policy: 1.50× and 2.00×.",
		"server CPU per call ext_authz check 1.10×, ext_proc request phase 1.10×, ext_proc request + response 1.10×",
		"**p99 at 1k / 2k per second** (shipped policy): ext_authz check 2.20 / 8.80 ms (2000/s reached 1500/s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| ext_") {
			rows++
		}
	}
	if want := len(envoyDoors) * 2 * (1 + len(r.opt.rates)); rows != want {
		t.Errorf("%d rows, want %d", rows, want)
	}
}

func TestRateNames(t *testing.T) {
	if got := strings.Join(rateNames([]int{500, 1000, 4000}), " "); got != "500 1k 4k" {
		t.Errorf("got %q", got)
	}
}
