// Package a2a is the edge adapter for the Agent2Agent protocol, versions 0.3 and 1.0,
// over the JSON-RPC and HTTP+JSON (REST) bindings. It parses requests into
// task.Request, upstream responses and SSE streams into task.Event, renders faults as
// protocol-correct errors, and parses and renders agent cards of both versions.
//
// Nothing outside adapters/ may import this package's wire shapes; it exports only
// functions over the kernel's types.
package a2a
