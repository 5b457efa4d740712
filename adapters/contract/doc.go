// Package contract is the adapter contract suite: one set of tests that every implementation
// of the ports (adapters/memory now, adapters/k8s against a real API server) must pass, so
// the fast in-memory tests and the demo mean something about production.
//
// An adapter's test implements Harness and calls Run (or one RunX per port):
//
//	func TestContract(t *testing.T) {
//		contract.Run(t, func(t *testing.T) contract.Harness { return newHarness(t) })
//	}
//
// Each case creates objects under fresh random names, lineages and synthesis UUIDs, so one
// API server can be shared by every case and every run; nothing is cleaned up. Reads that
// an adapter may serve from a cache (ListCachedChunks, GetComposition, GetSlice) are polled
// with Harness.Eventually; everything else is expected to hold at once.
//
// It is a normal package so adapters in other packages can import it; it imports domain,
// ports, the standard library and testify, and starts no goroutine that outlives a case.
package contract
