// Package memory is an in-memory model of the control plane (Compositions, ResourceSlices)
// and of the downstream cluster (the inventory namespace's Secrets, and objects a test puts
// there). A Cluster implements every port the use cases write through, with the
// resourceVersion, conflict and AlreadyExists semantics of a real API server, so fast tests
// exercise the same paths a cluster would. It passes the shared adapter contract suite in
// adapters/contract. Stories with Eno in them (the demo, test/reliability, test/sim) run on
// the subpackages instead: apiserver, an in-memory API server, and enomodel, the one model of
// stock Eno v0.2.17, acting on it.
//
// A Cluster is safe for concurrent use and starts no goroutines. Every object is deep-copied
// on the way in and out; callers never share memory with stored state. There is no cache:
// reads that a real adapter may serve from an informer are live here. There is no garbage
// collection either: deleting a Composition leaves the ResourceSlices it owns in place, and
// the downstream objects.
//
// It imports domain, ports and the standard library only.
package memory
