// Package resilience holds the reliability and security scenarios of tombstone recovery that
// need a real API server (internal/kubetest): crash consistency of multi-Secret snapshot
// replacement through the Kubernetes adapters, two real `tombstone-recovery run` processes racing
// over one cluster while syntheses change, API faults injected at every call site of a
// reconcile, and the security properties (request scope, no deletes, no Secret data in logs,
// least-privilege RBAC and admission policies from deploy/, in place for every story).
//
// The package is tests only. The in-memory counterparts live in test/reliability.
package resilience
