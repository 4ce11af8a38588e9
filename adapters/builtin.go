package adapters

import (
	"github.com/writ-authz/writ/adapters/a2a"
	"github.com/writ-authz/writ/adapters/acp"
)

// DirectoryPath serves writ's directory of the routed agents as A2A cards.
const DirectoryPath = "/.well-known/writ/directory"

// builtin is the protocols writ ships, in table order. A new protocol is a
// package beside a2a and acp with its Edge, and one entry here (or a
// Register call of its own, as the tests' fake protocol makes): the core,
// config, the Envoy doors and the layers test read the table.
var builtin = []Protocol{
	{Name: a2a.ProtocolName, Edge: func(o RouteOptions) Edge { return a2a.Edge{JSONRPCPath: o.JSONRPCPath} },
		Fallback: true, DirectoryPath: DirectoryPath},
	{Name: acp.ProtocolName, Edge: func(RouteOptions) Edge { return acp.Edge{} },
		Segments: acp.Resources(), DirectoryPath: acp.AgentsPath},
	{Name: a2a.GRPCProtocolName, Edge: func(RouteOptions) Edge { return a2a.GRPCEdge{} }, GRPC: true},
}

func init() {
	for _, p := range builtin {
		if err := Register(p); err != nil {
			panic("adapters: the built-in protocol table: " + err.Error()) // a programming error, found by every test
		}
	}
}

// Compile-time checks of the roles each edge plays.
var (
	_ interface {
		Edge
		Answers
		Cards
		SignedCards
		ExtendedCards
		Push
		Poller
		Subscriber
		Lister
		Negotiator
	} = a2a.Edge{}
	_ interface {
		Edge
		Answers
		CardRenderer
		Poller
		Prober
	} = acp.Edge{}
	_ interface {
		Edge
		Answers
		Canonical
		ExtendedCards
		Push
		Lister
	} = a2a.GRPCEdge{}
)
