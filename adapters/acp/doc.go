// Package acp is the edge adapter for ACP (Agent Communication Protocol, REST, OpenAPI 0.2.0): it parses requests, responses, streams, runs and manifests into the kernel's task model and renders faults as ACP errors.
package acp
