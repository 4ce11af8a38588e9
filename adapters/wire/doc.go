// Package wire holds what every edge adapter needs below its protocol: the inbound
// HTTP envelope, bounded JSON checks, the SSE framing reader, writ's own
// data-classification declaration, and the HTTP status of each fault kind.
package wire
