//go:build eno

// Package eno is the acceptance test of design §10: the recovery controller next to stock Eno
// v0.2.17 (eno-controller, eno-reconciler and its executor, built from Eno's source by
// hack/eno-build.sh) on the real etcd and kube-apiserver of internal/kubetest, with Eno's own
// CRDs. It holds tests only and compiles only with the build tag eno: run it with
// `make test-eno ENO_SRC=<Eno's source: a directory or a .tar.gz>`.
//
// What stands in for a real cluster, and why it is faithful enough:
//   - There is no kubelet. eno-controller creates a synthesizer Pod per synthesis and the Pod
//     stays Pending; a stand-in (kubelet_test.go) runs Eno's executor once per Pod, with the
//     Pod's executor container environment and the admin kubeconfig, as the container would.
//     The executor runs the Synthesizer's command (a local shell script here) with the KRM
//     ResourceList on stdin and reads the ResourceList it prints. The stand-in never updates the
//     Pod's status, so a failed executor shows as a synthesis timeout (eno-controller's
//     --pod-timeout, 30 s) instead of a fast cancel.
//   - There is no controller-manager, hence no garbage collection: only what Eno deletes goes
//     away, which is exactly what the scenarios assert on.
//   - The control plane and the downstream cluster are one API server.
//
// TestEnoAlone checks the harness models Eno (a dropped resource is deleted by Eno) and
// TestEnoFacts checks, on stock Eno alone, the behaviour design §6.2's hand-off is built on.
//
// disabled_test.go holds the stories about Eno's eno.azure.io/disable-reconciliation, which
// makes Eno's reconciler skip a resource even when it is a tombstone: an entry recorded
// disabled, or with overrides that can disable it (Eno's resource migration), is never
// tombstoned; a pending hand-off's tombstone whose object was re-created is withdrawn by
// disabling it, so an eno-reconciler restarted later skips it. Those scenarios create
// Synthesizers of their own, whose script can fail on demand (a gate file), as a broken
// synthesizer would.
//
// large_test.go holds the story of a large recovery: 400 ConfigMaps with long names and many
// long labels, whose tombstones (about 1.8 MB) are cut into four recovery slices of at most
// Eno's slice budget (512 KiB of manifests). Approved over the deletion guard, the hand-off is
// committed with every slice named by the synthesis; Eno's executor carries the tombstones of all
// of them into its own slices (cut by its own rule, which fills a slice until it crosses the
// budget) and eno-reconciler deletes every orphan and nothing else.
//
// Each scenario works in its own namespace, with an eno-reconciler (and, in the standalone
// mode, a `tombstone-recovery run`) limited to that namespace; eno-controller and the stand-in
// are shared. Every scenario runs twice: with the standalone binary next to stock
// eno-reconciler, and with eno-reconciler built with the recovery controller wired in
// (hack/eno-wire.sh). Every process is stopped by its PID; logs are kept in files and their
// tails printed when a test fails (ENO_SHOW_LOGS=1 prints them always). ENO_MEASURE=1 adds
// TestMeasureRecovery (time to Eno's deletion) and TestMeasureReconcilerCost (memory and requests
// of the controller inside eno-reconciler).
package eno
