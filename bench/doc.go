// Package bench holds writ's benchmark harnesses that need no server process:
// the adapters' parse cost per operation and the sidecar against a bare
// httputil.ReverseProxy. `make bench` (bench/report) runs them with the other
// in-process benchmarks and the ext_authz load runs, and writes REPORT.md.
package bench
