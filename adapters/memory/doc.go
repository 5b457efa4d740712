// Package memory is an in-memory model of the control plane (Compositions, ResourceSlices)
// and of the downstream cluster (the inventory namespace's Secrets, and the objects Eno
// applies). A Cluster implements every port the use cases write through, with the
// resourceVersion, conflict and AlreadyExists semantics of a real API server, so the demo and
// fast tests exercise the same paths a cluster would. It passes the shared adapter contract
// suite in adapters/contract. Eno models the few observed behaviours of stock Eno that the
// hand-off of tombstones relies on (synthesis, forced resynthesis, reconciliation).
//
// A Cluster is safe for concurrent use and starts no goroutines. Every object is deep-copied
// on the way in and out; callers never share memory with stored state. There is no cache:
// reads that a real adapter may serve from an informer are live here. There is no garbage
// collection either: deleting a Composition leaves the ResourceSlices it owns in place, and
// the downstream objects Eno applied for it.
//
// It imports domain, ports and the standard library only.
package memory
