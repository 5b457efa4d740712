// Package memory is an in-memory model of the control plane (Compositions, ResourceSlices)
// and of the downstream cluster's inventory namespace (Secrets). It implements every port
// the use cases write through, with the resourceVersion, conflict and AlreadyExists
// semantics of a real API server, so the demo and fast tests exercise the same paths a
// cluster would. It passes the shared adapter contract suite in adapters/contract.
//
// A Cluster is safe for concurrent use and starts no goroutines. Every object is deep-copied
// on the way in and out; callers never share memory with stored state. There is no cache:
// reads that a real adapter may serve from an informer are live here. There is no garbage
// collection either: deleting a Composition leaves the ResourceSlices it owns in place.
//
// It imports domain, ports and the standard library only.
package memory
