package layers

import (
	"slices"
	"testing"
)

// The one assembly (DESIGN §2): package server builds a running writ from a
// configuration, and is the one product package that wires the doors to
// the core. cmd/writ is flag parsing and printing over it: it imports the
// assembly and the packages its commands print from, never the core, a
// door, a worker, a store or an observer the assembly wires.

// assembly is the assembly's package.
const assembly = "server"

// command is the binary's package.
const command = "cmd/writ"

// commandImports are the packages of ours cmd/writ may import, each for the
// command that prints from it.
var commandImports = []string{
	assembly,             // serve, validate, eval, inspect, policy test, the log every command writes
	"config",             // every command reads the configuration
	"internal/demo",      // demo
	"internal/devidp",    // dev token, dev jwks
	"internal/buildinfo", // version
	"sts",                // sts
	"adapters/names",     // inspect -protocol
	"adapters/wire",      // inspect: the request message read
	"adapters/examples",  // inspect -example
	"authz/identity",     // dev: the development issuer
	"decisionlog",        // report -verify
	"report",             // report
}

// doorWirers are the packages besides the assembly that may import a door,
// each with its reason. A package that wires a door by hand is a second
// assembly; a new one belongs in server's door list instead.
var doorWirers = map[string]string{
	"bench/report": "names a door's function in its CPU profile's categories; it builds nothing",
}

// assemblyProblems checks the assembly rules on g: cmd/writ imports only
// commandImports, the assembly imports every door, and no other product
// package imports one (but doorWirers).
func assemblyProblems(g map[string]node) []string {
	doors, _ := doorProblems(g)
	var problems []string
	for _, d := range g[command].imports {
		if !slices.Contains(commandImports, d) {
			problems = append(problems, command+" imports "+d+": the binary is flags and printing over the assembly ("+assembly+")")
		}
	}
	for _, door := range doors {
		if !slices.Contains(g[assembly].imports, door) {
			problems = append(problems, assembly+" does not import the door "+door+": every door is one entry of the assembly's door list")
		}
	}
	for p, n := range g {
		if p == assembly || doorWirers[p] != "" || slices.Contains(doors, p) {
			continue
		}
		for _, d := range n.imports {
			if slices.Contains(doors, d) {
				problems = append(problems, p+" imports the door "+d+": only the assembly ("+assembly+") wires doors")
			}
		}
	}
	slices.Sort(problems)
	return problems
}

// TestOneAssembly runs the assembly rules on the module as it is.
func TestOneAssembly(t *testing.T) {
	g := graph(t)
	for _, p := range []string{assembly, command} {
		if _, ok := g[p]; !ok {
			t.Fatalf("package %s not found", p)
		}
	}
	for p := range doorWirers {
		if _, ok := g[p]; !ok {
			t.Errorf("doorWirers names %s, which does not exist", p)
		}
	}
	for _, p := range assemblyProblems(g) {
		t.Error(p)
	}
}

// TestAssemblyRulesCatch: the rules fail on the binary importing the core,
// a door or a store, on a door the assembly leaves out, and on a second
// package wiring a door.
func TestAssemblyRulesCatch(t *testing.T) {
	base := func() map[string]node {
		return map[string]node{
			core:            {deps: []string{module + "/task"}, imports: []string{"task"}},
			"proxy/sidecar": {deps: []string{module + "/proxy"}, imports: []string{core}},
			"proxy/extproc": {deps: []string{module + "/proxy"}, imports: []string{core}},
			assembly:        {imports: []string{core, "proxy/sidecar", "proxy/extproc", "task/filestore"}},
			command:         {imports: []string{assembly, "config", "report"}},
			"internal/demo": {imports: []string{assembly}},
		}
	}
	if problems := assemblyProblems(base()); len(problems) != 0 {
		t.Fatalf("a graph that keeps the rules: %v", problems)
	}
	for name, breakIt := range map[string]func(g map[string]node){
		"the binary imports the core": func(g map[string]node) {
			n := g[command]
			n.imports = append(n.imports, core)
			g[command] = n
		},
		"the binary imports a door": func(g map[string]node) {
			n := g[command]
			n.imports = append(n.imports, "proxy/sidecar")
			g[command] = n
		},
		"the binary opens a store": func(g map[string]node) {
			n := g[command]
			n.imports = append(n.imports, "task/filestore")
			g[command] = n
		},
		"the assembly leaves a door out": func(g map[string]node) {
			g["proxy/egress"] = node{deps: []string{module + "/proxy"}, imports: []string{core}}
		},
		"a harness wires a door by hand": func(g map[string]node) {
			n := g["internal/demo"]
			n.imports = append(n.imports, "proxy/extproc")
			g["internal/demo"] = n
		},
	} {
		g := base()
		breakIt(g)
		if len(assemblyProblems(g)) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
