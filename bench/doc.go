// Package bench holds writ's benchmark harnesses that need no server process:
// the adapters' parse cost per operation and the sidecar against a bare
// httputil.ReverseProxy. `make bench` (bench/report) runs them with the other
// in-process benchmarks and the ext_authz load runs, and writes REPORT.md;
// `make bench-envoy` (bench/report -envoy) writes ENVOY.md. Their load
// client is bench/load (bench/loadgen); envoy_test.go checks that what it
// sends is allowed by writ's real Envoy doors.
package bench
