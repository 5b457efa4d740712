// Package fidelity proves the simulation's in-memory API server (test/sim/apiserver)
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
// FinishNamespaceDeletion). Each accepted difference is named in a comment where the sequences
// step over it.
package fidelity
