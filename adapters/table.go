package adapters

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/writ-authz/writ/adapters/names"
)

// Protocol is one protocol of writ's table: everything the admission core,
// the configuration and the doors know of it. A protocol is one registered
// value (as a caddy module is one registered ModuleInfo): the core finds the
// protocol's roles by type assertion on the edges Edge builds, config accepts
// Name in agents[].protocol, and the Envoy doors forward the headers its
// edge reads (DecisionHeaders).
type Protocol struct {
	// Name is what the protocol's requests carry in task.Protocol.Name, what
	// agents[].protocol names and what Edge(...).Name() returns: lower-case
	// letters, digits and '-' (see package names).
	Name string
	// Edge builds the protocol's edge for one route. Every edge parses and
	// renders (Edge); it plays the protocol's other roles (Answers, Cards,
	// Push, Poller, Negotiator, ...) by implementing them.
	Edge func(RouteOptions) Edge
	// Segments are the first path segments below a route that make a
	// request on an auto route this protocol's (ACP's resources: runs,
	// agents, sessions). No two protocols claim a segment.
	Segments []string
	// Fallback makes this the protocol of an auto route's requests that no
	// protocol's Segments claim. At most one protocol is the fallback, and an
	// auto route needs one.
	Fallback bool
	// DirectoryPath is where writ answers, for any route, with its directory
	// of the agents a caller may see, rendered by this protocol's edge (which
	// must then be a CardRenderer); "" for none.
	DirectoryPath string
	// GRPC: the protocol is served over gRPC. Its agents get a gRPC listener
	// of their own (agents[].grpc_listen), whose door hands the edge each
	// call as a wire.GRPC request and maps its answers as wire.GRPC says; no
	// auto route reads it (a gRPC path names a method, not a protocol).
	GRPC bool
}

// RouteOptions are a route's settings that an edge may read.
type RouteOptions struct {
	// JSONRPCPath is where the agent serves JSON-RPC (agents[].jsonrpc_path).
	JSONRPCPath string
}

// DecisionHeaders names every request header the protocol's Parse reads
// (see Edge.DecisionHeaders).
func (p Protocol) DecisionHeaders() []string { return p.Edge(RouteOptions{}).DecisionHeaders() }

// NegotiationHeaders names the protocol's request headers that negotiate it
// (see Negotiator); none when its edge does not negotiate.
func (p Protocol) NegotiationHeaders() []string {
	if n, ok := p.Edge(RouteOptions{}).(Negotiator); ok {
		return n.NegotiationHeaders()
	}
	return nil
}

// table is one immutable state of the registry: requests read it without a
// lock, Register replaces it whole.
type table struct {
	protocols []Protocol
	edges     map[string]Edge         // by name, with default options
	segments  map[string]string       // first path segment → protocol name
	directory map[string]CardRenderer // DirectoryPath → renderer
	fallback  string
}

var (
	registerMu sync.Mutex
	current    atomic.Pointer[table]
)

func loadTable() *table {
	if t := current.Load(); t != nil {
		return t
	}
	return &table{}
}

// Register adds a protocol to the table. It is called at init (builtin.go
// registers the protocols writ ships) or, in a test, before the routes that
// use the protocol are built: a Route keeps the table it was built from. It
// refuses a value that would make the table ambiguous: a name taken or not
// plain, a segment or directory path another protocol has, a second
// fallback, an edge that does not name itself Name, or a directory without a
// card renderer.
func Register(p Protocol) error {
	registerMu.Lock()
	defer registerMu.Unlock()
	old := loadTable()
	if p.Edge == nil {
		return fmt.Errorf("protocol %q: no Edge", p.Name)
	}
	edge := p.Edge(RouteOptions{})
	if edge == nil || edge.Name() != p.Name {
		return fmt.Errorf("protocol %q: its edge must name itself %q", p.Name, p.Name)
	}
	if p.GRPC && (p.Fallback || len(p.Segments) > 0) {
		return fmt.Errorf("protocol %q: a protocol served over gRPC is never read on an auto route (no segments, not the fallback)", p.Name)
	}
	p.Segments = slices.Clone(p.Segments)
	for _, s := range p.Segments {
		if s == "" || strings.Contains(s, "/") {
			return fmt.Errorf("protocol %q: segment %q is not one path segment", p.Name, s)
		}
		if other, taken := old.segments[s]; taken {
			return fmt.Errorf("protocol %q: segment %q is already %s's", p.Name, s, other)
		}
	}
	if p.Fallback && old.fallback != "" {
		return fmt.Errorf("protocol %q: %s is already the fallback of auto routes", p.Name, old.fallback)
	}
	var renderer CardRenderer
	if p.DirectoryPath != "" {
		r, ok := edge.(CardRenderer)
		switch {
		case !strings.HasPrefix(p.DirectoryPath, "/"):
			return fmt.Errorf("protocol %q: directory path %q does not start with /", p.Name, p.DirectoryPath)
		case !ok:
			return fmt.Errorf("protocol %q: a directory path, but its edge renders no cards", p.Name)
		case old.directory[p.DirectoryPath] != nil:
			return fmt.Errorf("protocol %q: directory path %s is already another protocol's", p.Name, p.DirectoryPath)
		}
		renderer = r
	}
	if err := names.Add(p.Name); err != nil { // the name's syntax and uniqueness
		return err
	}
	if p.GRPC {
		if err := names.MarkGRPC(p.Name); err != nil {
			return err
		}
	}
	t := &table{protocols: append(slices.Clone(old.protocols), p), edges: clone(old.edges), segments: clone(old.segments),
		directory: clone(old.directory), fallback: old.fallback}
	t.edges[p.Name] = edge
	for _, s := range p.Segments {
		t.segments[s] = p.Name
	}
	if renderer != nil {
		t.directory[p.DirectoryPath] = renderer
	}
	if p.Fallback {
		t.fallback = p.Name
	}
	current.Store(t)
	return nil
}

func clone[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m)+4)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Protocols is the table, in registration order.
func Protocols() []Protocol { return slices.Clone(loadTable().protocols) }

// Lookup returns the protocol of a name.
func Lookup(name string) (Protocol, bool) { return loadTable().lookup(name) }

func (t *table) lookup(name string) (Protocol, bool) {
	for _, p := range t.protocols {
		if p.Name == name {
			return p, true
		}
	}
	return Protocol{}, false
}

// DecisionHeaders names, canonical and sorted, every request header some
// protocol's Parse reads: what a platform in front of writ must pass to it
// (Envoy's ext_authz allowed_headers).
func DecisionHeaders() []string {
	var out []string
	for _, p := range loadTable().protocols {
		for _, h := range p.DecisionHeaders() {
			if h = http.CanonicalHeaderKey(h); !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ForProtocol returns the edge of a protocol by name (a task record's
// protocol), with default options.
func ForProtocol(name string) (Edge, bool) {
	e, ok := loadTable().edges[name]
	return e, ok
}

// Directory reports whether a request asks for writ's directory, and the
// renderer of its entries: the protocol whose DirectoryPath the request
// names (A2A cards at DirectoryPath, ACP manifests at ACP's agent listing,
// GET /agents), whatever the routes' protocols.
func Directory(method, path string) (CardRenderer, bool) {
	if method != http.MethodGet && method != http.MethodHead {
		return nil, false
	}
	r, ok := loadTable().directory[path]
	return r, ok
}

// Route is the edges of one protected agent: the edge of its configured
// protocol, or for an auto route every protocol's, picked per request. The
// edges are built once, by NewRoute (the zero Route has none).
type Route struct {
	fixed    Edge            // the configured protocol's; nil on an auto route
	segments map[string]Edge // auto: the edge of a first path segment
	fallback Edge            // auto: the edge of every other path
	cards    Cards           // the edge whose cards the agent publishes, if any
}

// errNoFallback is an auto route's error when no protocol is the fallback.
var errNoFallback = errors.New("no registered protocol is the fallback of an auto route")

// NewRoute returns the edges of a route whose agent speaks protocol (a
// registered name, or names.Auto or "" to detect it per request) and serves
// JSON-RPC at jsonrpcPath; an error for an unknown protocol.
func NewRoute(protocol, jsonrpcPath string) (Route, error) {
	t, opts := loadTable(), RouteOptions{JSONRPCPath: jsonrpcPath}
	if protocol != "" && protocol != names.Auto {
		p, ok := t.lookup(protocol)
		if !ok {
			return Route{}, fmt.Errorf("unknown protocol %q (want %s)", protocol, names.Choices())
		}
		r := Route{fixed: p.Edge(opts)}
		r.cards, _ = r.fixed.(Cards)
		return r, nil
	}
	if t.fallback == "" {
		return Route{}, errNoFallback
	}
	r := Route{segments: map[string]Edge{}}
	for _, p := range t.protocols {
		if p.GRPC {
			continue // see Protocol.GRPC
		}
		e := p.Edge(opts)
		for _, s := range p.Segments {
			r.segments[s] = e
		}
		if p.Name == t.fallback {
			r.fallback = e
		}
		if c, ok := e.(Cards); ok && r.cards == nil {
			r.cards = c // the first in table order that has cards
		}
	}
	return r, nil
}

// For returns the edge of a request to path (the path below the route): the
// configured protocol's, or on an auto route the protocol whose Segments
// hold the path's first segment, else the fallback's.
func (r Route) For(path string) Edge {
	if r.fixed != nil {
		return r.fixed
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if e, ok := r.segments[first]; ok {
		return e
	}
	return r.fallback
}

// Cards returns the edge whose cards the route's agent publishes (on an auto
// route the first protocol in the table that has cards), if any.
func (r Route) Cards() (Cards, bool) { return r.cards, r.cards != nil }
