// Package task is writ's kernel: the internal task model that no protocol owns.
//
// Adapters (adapters/a2a, adapters/acp) translate wire requests, responses and
// stream events into the values declared here; policies and the lifecycle store see
// only these values. This package imports nothing else from writ, and it must not
// learn any protocol's vocabulary: a new protocol revision is an adapter change.
package task
