// Package kubetest runs a real etcd and kube-apiserver for tests that need genuine API-server
// semantics: resourceVersion conflicts, RBAC, validation limits such as the 1 MiB Secret cap, and
// the status subresource of Eno's CRDs.
//
// Start launches both processes on free loopback ports in a temporary directory, installs minimal
// Eno CRDs (crds/eno-crds.yaml; Options.CRDs replaces them, e.g. with Eno's real CRDs for
// test/eno) and hands back rest.Configs and kubeconfig files for an admin and for declared
// least-privilege users. Packages use it from TestMain through TestMainWithEnv.
//
// It also holds what the packages testing against it share: Clients for an identity, a namespace
// and a context per test (clients.go); Compositions, their status.currentSynthesis and
// ResourceSlices written as Eno writes them (fixtures.go); the steps of a story told to the real
// binary: syntheses published as Eno publishes them, waits for decisions and snapshots (story.go);
// and building cmd/tombstone-recovery and running it as a child process (StartBuild, RaceEnabled,
// ChildEnv, ChildSysProcAttr, FreePorts, WriteKubeconfig; Env.StartController and Controller in
// controller.go, for test/e2e and test/image alike).
//
// The binaries come from the separate test/kube module (built by hack/testbin.sh, `make testbin`)
// so that k8s.io/kubernetes never enters the main module's graph. This package imports only the
// standard library, k8s.io/client-go, k8s.io/apimachinery, k8s.io/api, testify's require,
// go.uber.org/goleak and the project's domain; it is for tests only and must not be imported by
// production code.
package kubetest
