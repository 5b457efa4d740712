// Package e2e runs the real `tombstone-recovery run` binary against a real etcd and
// kube-apiserver (internal/kubetest) and checks what an operator sees: the Secrets, decisions,
// tombstone slices, events, probes, metrics, RBAC and exit codes. It holds tests only.
//
// TestMain builds the binary once (with -race when the tests run with it). A failing test
// prints the binary's output; E2E_SHOW_LOGS=1 prints it for every test.
package e2e
