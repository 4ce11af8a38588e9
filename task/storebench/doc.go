// Package storebench compares the lifecycle stores (memory, file, Redis) on
// the allow path and measures what each keeps per task. It holds benchmarks
// only: `make bench`, or
//
//	go test -run='^$' -bench=. ./task/storebench
package storebench
