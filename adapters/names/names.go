// Package names is the names in writ's protocol table (package adapters),
// for a package that must know which protocol names exist without linking
// the protocols themselves: config validates agents[].protocol against it,
// and the observers that import config stay free of every parser.
//
// Package adapters is the only writer: adapters.Register adds a protocol's
// name here as it adds the protocol to the table. So the names are those of
// the protocols linked into the program, as database/sql's drivers are;
// every writ program links package adapters (the admission core imports it).
package names

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Auto is the route protocol that is no protocol of its own: the protocol of
// each request is detected from its path (see adapters.Route).
const Auto = "auto"

var (
	mu   sync.RWMutex
	list []string
)

// Add adds a protocol name. It is for package adapters' Register; the name
// must be lower-case letters, digits and '-', start with a letter, be at most
// 32 bytes, not be Auto, and not be added already.
func Add(name string) error {
	if err := valid(name); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(list, name) {
		return fmt.Errorf("protocol %q is already registered", name)
	}
	list = append(list, name)
	return nil
}

func valid(name string) error {
	if name == "" || len(name) > 32 || name[0] < 'a' || name[0] > 'z' {
		return fmt.Errorf("protocol name %q: want a lower-case letter, then letters, digits or '-', at most 32 bytes", name)
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return fmt.Errorf("protocol name %q: want a lower-case letter, then letters, digits or '-', at most 32 bytes", name)
		}
	}
	if name == Auto {
		return fmt.Errorf("protocol name %q is reserved: a route naming it detects the protocol per request", name)
	}
	return nil
}

// Known reports whether name is a registered protocol (Auto is not one).
func Known(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Contains(list, name)
}

// All is the registered protocol names, in the order they were registered.
func All() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Clone(list)
}

// Choices is what a route may name, for messages: "a, b or auto".
func Choices() string {
	all := append(All(), Auto)
	if len(all) == 1 {
		return all[0]
	}
	return strings.Join(all[:len(all)-1], ", ") + " or " + all[len(all)-1]
}

// grpcNames are the registered protocols served over gRPC: their agents get
// a gRPC listener of their own (agents[].grpc_listen), not a route of the
// HTTP listener.
var grpcNames []string

// MarkGRPC records that a registered protocol is served over gRPC. It is for
// package adapters' Register, after Add.
func MarkGRPC(name string) error {
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(list, name) {
		return fmt.Errorf("protocol %q is not registered", name)
	}
	if !slices.Contains(grpcNames, name) {
		grpcNames = append(grpcNames, name)
	}
	return nil
}

// GRPC reports whether name is a registered protocol served over gRPC.
func GRPC(name string) bool {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Contains(grpcNames, name)
}

// AllGRPC is the registered protocols served over gRPC, in registration order.
func AllGRPC() []string {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Clone(grpcNames)
}
