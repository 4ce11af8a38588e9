package layers

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The front doors are peers around one admission core (DESIGN §3): the core
// (proxy) imports no door and no door's wire, every door imports the core
// and the few packages a mapping of an Outcome needs, and no door imports
// another. A door is any package under proxy/ that imports the core, but the
// core's workers (which serve the core, not a caller); the other packages
// under proxy/ are helpers below the core, which a door may share.

// core is the admission core's package.
const core = "proxy"

// workers are the packages under proxy/ that import the core without being
// a door: they take work from it, never a request from a caller.
var workers = []string{"proxy/follow"}

// coreLeaves are the only packages under proxy/ the core may depend on (the
// link table egress mode keeps of forwarded requests among them).
var coreLeaves = []string{"proxy/push", "proxy/writheader", "proxy/link", "proxy/canonical"}

// doorImports are the packages of ours a door may import besides the
// helpers under proxy/: the core, the adapters' registry and wire, the
// events, the kernel's types, the configuration, and the identity resolver
// (to map a caller a platform in front verified), and the token exchange
// client (the egress door obtains outbound tokens with it). Never the
// decision engine, a store, an observer, a protocol's own adapter, or
// another door.
var doorImports = []string{core, "adapters", "adapters/wire", "events", "task", "config", "authz/identity", "authz/exchange"}

// workerImports are the packages of ours a worker may import.
var workerImports = []string{core, "task", "task/lease", "config"}

// foreignWire are the module paths of a door's own wire, which the core
// never depends on.
var foreignWire = []string{"github.com/envoyproxy/", "google.golang.org/grpc"}

// bundledWire is A2A 0.3's protobuf messages, which the A2A adapter reads
// (the gRPC binding's wire types): a2a-go ships them in one Go package with
// the service's gRPC stubs, so the core depends on grpc-go through them
// alone. What that package pulls in is exempt from foreignWire; a package of
// ours that the core depends on and that imports the door's wire itself is
// still a problem.
const bundledWire = "github.com/a2aproject/a2a-go/a2apb"

// node is one package of the module: its transitive dependencies (all) and
// its direct imports of ours, relative to the module.
type node struct {
	deps    []string // every dependency, full import paths
	imports []string // direct imports of ours, relative
	foreign []string // direct imports of other modules, full import paths
}

// graph returns every package of the module with its dependencies.
func graph(t *testing.T) map[string]node {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string]node{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath    string
			Deps, Imports []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		var foreign []string
		for _, i := range p.Imports {
			if !strings.HasPrefix(i, module) {
				foreign = append(foreign, i)
			}
		}
		g[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = node{deps: p.Deps, imports: ours(p.Imports), foreign: foreign}
	}
	cmd = exec.Command("go", "list", "-deps", bundledWire)
	cmd.Dir = "../.."
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go list %s: %v", bundledWire, err)
	}
	g[bundledWire] = node{deps: strings.Fields(string(out))}
	return g
}

// doorProblems checks the door rules on g and returns the doors it found
// and every rule broken.
func doorProblems(g map[string]node) (doors []string, problems []string) {
	under := func(p string) bool { return strings.HasPrefix(p, core+"/") }
	importsCore := func(p string) bool { return slices.Contains(g[p].imports, core) }
	for p := range g {
		if under(p) && importsCore(p) && !slices.Contains(workers, p) {
			doors = append(doors, p)
		}
	}
	slices.Sort(doors)
	for _, d := range ours(g[core].deps) {
		if under(d) && !slices.Contains(coreLeaves, d) {
			problems = append(problems, core+" depends on "+d+": the core imports no door, no worker and no door's helper")
		}
	}
	var exempt []string
	if slices.Contains(g[core].deps, bundledWire) {
		exempt = g[bundledWire].deps
	}
	isWire := func(d string) bool {
		return slices.ContainsFunc(foreignWire, func(w string) bool { return strings.HasPrefix(d, w) })
	}
	for _, d := range g[core].deps {
		if isWire(d) && !slices.Contains(exempt, d) {
			problems = append(problems, core+" depends on "+d+": a door's wire stays in the door")
		}
	}
	for _, d := range append(ours(g[core].deps), core) {
		for _, f := range g[d].foreign {
			if isWire(f) {
				problems = append(problems, d+" imports "+f+", and the core depends on it: a door's wire stays in the door")
			}
		}
	}
	helper := func(p string) bool { return under(p) && !importsCore(p) && !slices.Contains(workers, p) }
	for _, door := range doors {
		for _, d := range g[door].imports {
			if !slices.Contains(doorImports, d) && !helper(d) {
				problems = append(problems, door+" imports "+d+": a door imports the core, the adapters' registry, wire, events and the helpers under proxy/, never another door or a worker")
			}
		}
		for _, d := range ours(g[door].deps) {
			if d != door && (slices.Contains(doors, d) || slices.Contains(workers, d)) {
				problems = append(problems, door+" depends on "+d+": doors are peers, and the assembly wires the workers")
			}
		}
	}
	for _, w := range workers {
		for _, d := range g[w].imports {
			if !slices.Contains(workerImports, d) {
				problems = append(problems, w+" imports "+d+": a worker uses the core's exported API and the kernel")
			}
		}
	}
	return doors, problems
}

// TestDoorsArePeers runs the door rules on the module as it is.
func TestDoorsArePeers(t *testing.T) {
	g := graph(t)
	doors, problems := doorProblems(g)
	for _, want := range []string{"proxy/sidecar", "proxy/extauthz", "proxy/extproc", "proxy/egress", "proxy/authzen"} {
		if !slices.Contains(doors, want) {
			t.Errorf("%s is not found as a door (doors: %v)", want, doors)
		}
	}
	for _, w := range workers {
		if _, ok := g[w]; !ok {
			t.Errorf("worker %s not found", w)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDoorRulesCatch: the rules fail on a door importing another door, a
// door reaching a worker or the decision engine, and the core importing a
// door's helper or wire — on graphs that break them (the real one cannot
// make the core import a door: that is an import cycle).
func TestDoorRulesCatch(t *testing.T) {
	base := func() map[string]node {
		return map[string]node{
			core:             {deps: []string{module + "/task", module + "/proxy/push"}, imports: []string{"task", "proxy/push"}},
			"proxy/push":     {imports: []string{"task"}},
			"proxy/envoyreq": {},
			"proxy/sidecar":  {deps: []string{module + "/proxy"}, imports: []string{core, "events"}},
			"proxy/extauthz": {deps: []string{module + "/proxy", module + "/proxy/envoyreq"}, imports: []string{core, "proxy/envoyreq"}},
			"proxy/follow":   {deps: []string{module + "/proxy"}, imports: []string{core, "task"}},
		}
	}
	if doors, problems := doorProblems(base()); len(problems) != 0 || !slices.Equal(doors, []string{"proxy/extauthz", "proxy/sidecar"}) {
		t.Fatalf("a graph that keeps the rules: doors %v, problems %v", doors, problems)
	}
	for name, breakIt := range map[string]func(g map[string]node){
		"a door imports another door": func(g map[string]node) {
			n := g["proxy/sidecar"]
			n.imports = append(n.imports, "proxy/extauthz")
			n.deps = append(n.deps, module+"/proxy/extauthz")
			g["proxy/sidecar"] = n
		},
		"a door depends on another door through a package": func(g map[string]node) {
			n := g["proxy/sidecar"]
			n.deps = append(n.deps, module+"/proxy/extauthz")
			g["proxy/sidecar"] = n
		},
		"a door imports a worker": func(g map[string]node) {
			n := g["proxy/sidecar"]
			n.imports = append(n.imports, "proxy/follow")
			g["proxy/sidecar"] = n
		},
		"a door imports the decision engine": func(g map[string]node) {
			n := g["proxy/sidecar"]
			n.imports = append(n.imports, "authz")
			g["proxy/sidecar"] = n
		},
		"the core imports a door's helper": func(g map[string]node) {
			n := g[core]
			n.deps = append(n.deps, module+"/proxy/envoyreq")
			g[core] = n
		},
		"the core imports a door": func(g map[string]node) {
			n := g[core]
			n.deps = append(n.deps, module+"/proxy/sidecar")
			g[core] = n
		},
		"the core depends on Envoy's wire": func(g map[string]node) {
			n := g[core]
			n.deps = append(n.deps, "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3")
			g[core] = n
		},
		"the core depends on a package that imports gRPC": func(g map[string]node) {
			n := g[core]
			n.deps = append(n.deps, module+"/adapters")
			g[core] = n
			g["adapters"] = node{foreign: []string{"google.golang.org/grpc/codes"}}
		},
		"the core depends on gRPC besides the bundled wire types": func(g map[string]node) {
			n := g[core]
			n.deps = append(n.deps, bundledWire, "google.golang.org/grpc/metadata")
			g[core] = n
			g[bundledWire] = node{deps: []string{"google.golang.org/grpc"}}
		},
		"a worker imports a door": func(g map[string]node) {
			n := g["proxy/follow"]
			n.imports = append(n.imports, "proxy/sidecar")
			g["proxy/follow"] = n
		},
	} {
		g := base()
		breakIt(g)
		if _, problems := doorProblems(g); len(problems) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
