package main

import (
	"bufio"
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/topdown"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/extauthz"
)

type machine struct {
	CPU, Kernel, Go, OPA, Commit string
	Cores                        int
	Date                         time.Time
	// LoadStart and LoadEnd are the host's 1-minute load average when the run
	// started and ended: other work on the host slows every figure down.
	LoadStart, LoadEnd string
	// stealStart holds /proc/stat's CPU times when the run started; Steal is
	// the share of the host's CPU time the hypervisor gave to other guests
	// during the run (-1 when unknown).
	stealStart cpuTimes
	Steal      float64
}

// cpuTimes are the steal and total jiffies of /proc/stat's "cpu" line.
type cpuTimes struct{ steal, total uint64 }

// readCPUTimes reads /proc/stat; ok is false where it cannot be read.
func readCPUTimes() (cpuTimes, bool) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	return parseCPUTimes(string(raw))
}

// parseCPUTimes reads the first line of /proc/stat: "cpu user nice system idle
// iowait irq softirq steal ...".
func parseCPUTimes(stat string) (cpuTimes, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		if i < 8 { // guest times are already counted in user and nice
			t.total += n
		}
		if i == 7 {
			t.steal = n
		}
	}
	return t, true
}

// end records the load average and the CPU steal share at the run's end.
func (m *machine) end() {
	m.LoadEnd = loadAverage()
	m.Steal = -1
	if now, ok := readCPUTimes(); ok && m.stealStart.total > 0 && now.total > m.stealStart.total {
		m.Steal = float64(now.steal-m.stealStart.steal) / float64(now.total-m.stealStart.total)
	}
}

// loadAverage reads the 1-, 5- and 15-minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func machineFacts() machine {
	m := machine{Cores: runtime.NumCPU(), Date: time.Now().UTC(), LoadStart: loadAverage()}
	m.stealStart, _ = readCPUTimes()
	m.Steal = -1 // until end()
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	cmd := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(out))
	}
	m.Kernel = cmd("uname", "-r")
	m.Go = strings.TrimPrefix(cmd("go", "env", "GOVERSION"), "go")
	m.OPA = strings.TrimPrefix(cmd("go", "list", "-m", "-f", "{{.Version}}", "github.com/open-policy-agent/opa"), "v")
	m.Commit = cmd("git", "rev-parse", "--short", "HEAD")
	if cmd("git", "status", "--porcelain", "--untracked-files=no") != "" {
		m.Commit += " (with uncommitted changes)"
	}
	return m
}

// benchStat collects one benchmark's results over rounds, per unit.
type benchStat struct {
	Name   string
	Values map[string][]float64 // unit → one value per round
}

// median of a unit's values (0 when absent).
func (b *benchStat) median(unit string) float64 {
	if b == nil {
		return 0
	}
	return median(b.Values[unit])
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// inprocGroups are the in-process benchmarks, by package; each round runs all
// of them once (-count 1), so repeated rounds interleave the benchmarks that
// the report divides by each other.
var inprocGroups = []struct {
	pkgs  []string
	re    string
	scale float64 // of BENCHTIME
}{
	{[]string{"./authz", "./authz/identity", "./proxy/extauthz"},
		"^(BenchmarkDecideMiss|BenchmarkDecideNewContext|BenchmarkDecideNewToken|BenchmarkDecideNewSubject|BenchmarkDecideNewSubjectReply|BenchmarkDecideHit|BenchmarkEvaluate|" +
			"BenchmarkEvaluatePartial|BenchmarkEvaluateAlwaysAllow|BenchmarkBuildInput|BenchmarkIdentifyCached|" +
			"BenchmarkIdentifyUncached|BenchmarkRS256Verify|BenchmarkCheck|BenchmarkCheckNewSubject|BenchmarkCacheBytes)$", 1},
	{[]string{"./bench"}, "^BenchmarkParse$", 0.2},
	{[]string{"./bench"}, "^BenchmarkSidecar$", 0.5},
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

func runInProc(r *results) error {
	base, err := time.ParseDuration(r.opt.benchtime)
	if err != nil {
		return fmt.Errorf("BENCHTIME: %w", err)
	}
	for round := range r.opt.rounds {
		for _, g := range inprocGroups {
			if g.re == "^BenchmarkSidecar$" && r.opt.skip["sidecar"] {
				continue
			}
			bt := time.Duration(float64(base) * g.scale)
			args := append([]string{"-c", "0", "go", "test", "-run", "^$", "-bench", g.re, "-benchmem",
				"-count", "1", "-benchtime", bt.String()}, g.pkgs...)
			logf("in-process round %d/%d: %s", round+1, r.opt.rounds, strings.Join(g.pkgs, " "))
			out, err := exec.Command("taskset", args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("go test -bench: %w\n%s", err, out)
			}
			parseBench(out, r.inproc)
		}
	}
	return nil
}

// parseBench reads `go test -bench` output into stats keyed by short package
// and benchmark name (authz.DecideMiss, bench.Parse/a2a-1.0-jsonrpc-send).
func parseBench(out []byte, into map[string]*benchStat) {
	pkg := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndex(p, "/")+1:]
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := pkg + "." + strings.TrimPrefix(m[1], "Benchmark")
		st := into[name]
		if st == nil {
			st = &benchStat{Name: name, Values: map[string][]float64{}}
			into[name] = st
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			st.Values[f[i+1]] = append(st.Values[f[i+1]], v)
		}
	}
}

// profileRow is one category of the server's CPU time.
type profileRow struct {
	Category string
	Share    float64 // of all samples
	PerCheck float64 // µs per check (share × CPU per check)
}

// categories map a profile's cumulative entries to the report's categories.
// A function may be counted in more than one (OPA's evaluator calls builtins);
// the shares are cumulative, not a partition. writ's own functions are named by
// the functions themselves (funcName), so a rename cannot leave a category
// silently at 0%.
var categories = []struct{ name, fn string }{
	{"gRPC server, a call (handleStream, incl. everything below)", "google.golang.org/grpc.(*Server).handleStream"},
	{"ext_authz door (extauthz.Server.Check, incl. below)", funcName((*extauthz.Server).Check)},
	{"admission core (proxy.Core.Admit, incl. below)", funcName((*proxy.Core).Admit)},
	{"identity (Identify, incl. RS256)", funcName((*identity.Resolver).Identify)},
	{"RS256 verification (crypto/rsa)", funcName(rsa.VerifyPKCS1v15)},
	{"JSON decoding (encoding/json.Unmarshal: token and body)", funcName(json.Unmarshal)},
	{"A2A body parse (adapters/a2a.Parse)", funcName(a2a.Parse)},
	{"decision (authz Engine.Decide, incl. evaluation and cache hits)", funcName((*authz.Engine).Decide)},
	{"policy evaluation (OPA topdown)", funcName((*topdown.Query).Iter)},
	{"protobuf unmarshal (CheckRequest)", funcName(proto.Unmarshal)},
	{"gRPC transport (HTTP/2 frames, HPACK)", "google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams"},
	{"syscalls (read/write)", "internal/runtime/syscall/linux.Syscall6"},
	{"GC (background mark workers)", "runtime.gcBgMarkWorker"},
	{"GC assist", "runtime.gcAssistAlloc"},
	{"goroutine stack growth (newstack)", "runtime.newstack"},
	{"memory allocation (mallocgc)", "runtime.mallocgc"},
}

// funcName is the name a CPU profile gives fn.
func funcName(fn any) string {
	return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
}

// categorize reads a CPU profile with `go tool pprof -top -cum` and returns the
// cumulative share of each category.
func categorize(bin, prof string, cpuPerCheck float64) ([]profileRow, error) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=100000", bin, prof).Output()
	if err != nil {
		return nil, fmt.Errorf("pprof: %w", err)
	}
	cum := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// flat flat% sum% cum cum% name...
		if len(f) < 6 || !strings.HasSuffix(f[4], "%") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err != nil {
			continue
		}
		name := strings.Join(f[5:], " ")
		name = strings.TrimSuffix(name, " (inline)")
		if v > cum[name] {
			cum[name] = v
		}
	}
	var rows []profileRow
	for _, c := range categories {
		share := cum[c.fn] / 100
		rows = append(rows, profileRow{Category: c.name, Share: share, PerCheck: share * cpuPerCheck})
	}
	return rows, nil
}
