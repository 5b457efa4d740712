// Package fidelity proves the simulation's in-memory API server (adapters/memory/apiserver)
// differentially: the same request sequences are replayed against it and against a real
// kube-apiserver (internal/kubetest, with the minimal Eno CRDs), and every response is compared
// after normalisation: status codes, reasons, messages and bodies, with UIDs, resourceVersions
// and timestamps compared by the structure of their equalities and by their order, not by
// value.
//
// The sequences cover what the simulation relies on: create, get, list with label and field
// selectors and pages, the metadata client's PartialObjectMetadata, updates with a stale or
// missing resourceVersion or another UID, JSON patches with failing and passing test
// operations, merge patches carrying a resourceVersion and a UID, the status subresource,
// DELETE plain and with UID and resourceVersion preconditions, finalizers, managedFields with
// per-manager times, the API server's part of garbage collection (the orphan and
// foregroundDeletion finalizers), namespace deletion, and a CRD's deletion with the
// apiextensions finalizer emptying it.
//
// What is not compared: the garbage collector and the namespace controller, which run in
// kube-controller-manager; internal/kubetest starts kube-apiserver and etcd only. The
// simulation models them as explicit sweeps (apiserver.Server.CollectGarbage and
// FinishNamespaceDeletion): the garbage collector's sweep deletes dependents whose owners are
// gone, drops references to gone owners of a dependent that has a live one, empties a
// foreground-deleting owner of its dependents and lifts its finalizer once no blocking one is
// left, and releases an orphaning owner once its dependents' references are dropped. Building
// kube-controller-manager next to kube-apiserver was measured: more than 580 s on the shared
// two cores even with kube-apiserver's packages cached, and new modules in test/kube; too dear
// for CI. Watch is not compared either: the simulated server serves none (its caches are
// views of its history, test/sim/caches.go).
//
// The accepted differences, each named in a comment where the sequences step over it:
//   - "no pages": the simulated server ignores limit and answers every item at once;
//   - "CRD defaulting and status": it writes no CRD status and defaults no conversion;
//   - "static resources": it serves a custom resource whether or not its CRD exists;
//   - "duplicated cause": kube-apiserver repeats a custom resource's metadata validation cause;
//   - an empty continue token in a custom resource list, which kube-apiserver writes.
package fidelity
