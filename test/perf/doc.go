// Package perf measures what tombstone recovery costs the API server, against a real
// kube-apiserver: the exact requests of one reconcile by verb and resource (tests with exact
// counts, and a benchmark reporting requests/op), and the time, request total and peak memory of
// the real binary recording 1,000 Compositions from scratch at its default client QPS (a test
// gated behind ENO_SCALE=1, run by `make scale`). BENCHMARKS.md holds the figures.
//
// The package is tests only. They may import domain, ports, app, adapters/k8s and
// internal/kubetest.
package perf
