package adapters_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/adapters/acp"
	"github.com/writ-authz/writ/adapters/names"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// TestBuiltinTable: writ ships A2A and then ACP (a protocol added later
// comes after them), their names in the names config reads; an auto route
// picks ACP for its resources and A2A for the rest, and publishes A2A's
// cards.
func TestBuiltinTable(t *testing.T) {
	var got []string
	for _, p := range adapters.Protocols() {
		got = append(got, p.Name)
	}
	if want := []string{a2a.ProtocolName, acp.ProtocolName}; len(got) < 2 || !slices.Equal(got[:2], want) || !slices.Equal(names.All(), got) {
		t.Fatalf("table %v, names %v, want %v first", got, names.All(), want)
	}
	if c := names.Choices(); !strings.HasPrefix(c, "a2a, acp") || !strings.HasSuffix(c, " or auto") {
		t.Errorf("Choices() = %q", c)
	}
	r, err := adapters.NewRoute(names.Auto, "/rpc")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/runs": "acp", "/agents/x": "acp", "/session/s": "acp", "/sessions/s": "acp",
		"/": "a2a", "/message:send": "a2a", "/tasks/t": "a2a", "/runsx": "a2a", "": "a2a"} {
		if e := r.For(path); e.Name() != want {
			t.Errorf("auto For(%q) = %s, want %s", path, e.Name(), want)
		}
	}
	if e, ok := r.For("/").(a2a.Edge); !ok || e.JSONRPCPath != "/rpc" {
		t.Errorf("the route's A2A edge %#v lost its JSON-RPC path", r.For("/"))
	}
	if c, ok := r.Cards(); !ok || c.(adapters.Edge).Name() != a2a.ProtocolName {
		t.Errorf("an auto route's cards: %v %v", c, ok)
	}
	fixed, err := adapters.NewRoute(acp.ProtocolName, "/")
	if err != nil {
		t.Fatal(err)
	}
	if fixed.For("/message:send").Name() != acp.ProtocolName {
		t.Error("a route of one protocol gives another's edge")
	}
	if _, ok := fixed.Cards(); ok {
		t.Error("an ACP route publishes cards")
	}
	if _, err := adapters.NewRoute("smtp", "/"); err == nil || !strings.Contains(err.Error(), `unknown protocol "smtp" (want `+names.Choices()+")") {
		t.Errorf("unknown protocol: %v", err)
	}
	for path, want := range map[string]string{adapters.DirectoryPath: a2a.ProtocolName, acp.AgentsPath: acp.ProtocolName} {
		r, ok := adapters.Directory("GET", path)
		if !ok || r.(adapters.Edge).Name() != want {
			t.Errorf("Directory(GET %s) = %v %v, want %s's", path, r, ok, want)
		}
		if _, ok := adapters.Directory("POST", path); ok {
			t.Errorf("Directory(POST %s) is the directory", path)
		}
	}
	if e, ok := adapters.ForProtocol(acp.ProtocolName); !ok || e.Name() != acp.ProtocolName {
		t.Errorf("ForProtocol(acp) = %v %v", e, ok)
	}
	if _, ok := adapters.ForProtocol("writ"); ok {
		t.Error("ForProtocol of a name not in the table")
	}
	hs := adapters.DecisionHeaders()
	for _, want := range []string{"A2a-Extensions", "A2a-Version", "Content-Type", "Writ-Data-Classification", "X-A2a-Extensions"} {
		if !slices.Contains(hs, want) {
			t.Errorf("DecisionHeaders() = %v, without %s", hs, want)
		}
	}
	if !slices.IsSorted(hs) || len(slices.Compact(slices.Clone(hs))) != len(hs) {
		t.Errorf("DecisionHeaders() = %v: not sorted and unique", hs)
	}
}

// other is an edge for the refused registrations below.
type other struct{ name string }

func (o other) Name() string                                              { return o.name }
func (other) Parse(wire.Inbound, wire.Limits) (task.Request, *task.Fault) { return task.Request{}, nil }
func (other) RenderFault(*task.Request, *task.Fault) wire.Rendered        { return wire.Rendered{} }
func (other) DecisionHeaders() []string                                   { return nil }

// cards is an other that renders cards.
type cards struct{ other }

func (cards) RenderCard(*task.AgentCard, string) ([]byte, error) { return nil, nil }

// TestRegisterRefusesAmbiguity: a registration that would make the table
// ambiguous, or a protocol unusable, is refused, for that reason, and
// leaves the table and the names as they were.
func TestRegisterRefusesAmbiguity(t *testing.T) {
	before, beforeNames := adapters.Protocols(), names.All()
	edge := func(n string) func(adapters.RouteOptions) adapters.Edge {
		return func(adapters.RouteOptions) adapters.Edge { return other{n} }
	}
	for _, c := range []struct {
		what, why string
		p         adapters.Protocol
	}{
		{"a name taken", "already registered", adapters.Protocol{Name: a2a.ProtocolName, Edge: edge(a2a.ProtocolName)}},
		{"the reserved name", "reserved", adapters.Protocol{Name: names.Auto, Edge: edge(names.Auto)}},
		{"a name not plain", "lower-case", adapters.Protocol{Name: "Fake/1", Edge: edge("Fake/1")}},
		{"no name", "lower-case", adapters.Protocol{Edge: edge("")}},
		{"no edge", "no Edge", adapters.Protocol{Name: "x1"}},
		{"an edge of another name", "must name itself", adapters.Protocol{Name: "x2", Edge: edge("x3")}},
		{"a segment taken", "already acp's", adapters.Protocol{Name: "x4", Edge: edge("x4"), Segments: []string{"runs"}}},
		{"a segment of two", "not one path segment", adapters.Protocol{Name: "x5", Edge: edge("x5"), Segments: []string{"a/b"}}},
		{"a second fallback", "already the fallback", adapters.Protocol{Name: "x6", Edge: edge("x6"), Fallback: true}},
		{"a directory without cards", "renders no cards", adapters.Protocol{Name: "x7", Edge: edge("x7"), DirectoryPath: "/x7"}},
		{"a directory not a path", "does not start with /", adapters.Protocol{Name: "x8",
			Edge: func(adapters.RouteOptions) adapters.Edge { return cards{other{"x8"}} }, DirectoryPath: "x8"}},
		{"a directory taken", "already another protocol's", adapters.Protocol{Name: "x9",
			Edge: func(adapters.RouteOptions) adapters.Edge { return cards{other{"x9"}} }, DirectoryPath: acp.AgentsPath}},
	} {
		if err := adapters.Register(c.p); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want an error saying %q", c.what, err, c.why)
		}
	}
	if got := adapters.Protocols(); len(got) != len(before) || !slices.Equal(names.All(), beforeNames) {
		t.Errorf("after refused registrations: %d protocols (%d before), names %v (%v before)", len(got), len(before), names.All(), beforeNames)
	}
}

// TestGRPCProtocol: A2A over gRPC is in the table, marked served over gRPC
// (config asks its agents for grpc_listen), never read on an auto route
// (its paths are method names), and a gRPC protocol with segments or as the
// fallback is refused.
func TestGRPCProtocol(t *testing.T) {
	if !names.GRPC(a2a.GRPCProtocolName) || names.GRPC(a2a.ProtocolName) || !slices.Contains(names.AllGRPC(), a2a.GRPCProtocolName) {
		t.Fatalf("gRPC protocols: %v", names.AllGRPC())
	}
	r, err := adapters.NewRoute(names.Auto, "/")
	if err != nil {
		t.Fatal(err)
	}
	if e := r.For("/a2a.v1.A2AService/SendMessage"); e.Name() != a2a.ProtocolName {
		t.Errorf("an auto route read a gRPC path with %s", e.Name())
	}
	fixed, err := adapters.NewRoute(a2a.GRPCProtocolName, "/")
	if err != nil || fixed.For("/").Name() != a2a.GRPCProtocolName {
		t.Fatalf("a gRPC route: %v %v", fixed, err)
	}
	for _, p := range []adapters.Protocol{
		{Name: "grpc-seg", Edge: func(adapters.RouteOptions) adapters.Edge { return other{"grpc-seg"} }, GRPC: true, Segments: []string{"grpcseg"}},
		{Name: "grpc-fb", Edge: func(adapters.RouteOptions) adapters.Edge { return other{"grpc-fb"} }, GRPC: true, Fallback: true},
	} {
		if err := adapters.Register(p); err == nil || !strings.Contains(err.Error(), "served over gRPC") {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}
