// Package policy checks, on a real API server (internal/kubetest), that the ValidatingAdmissionPolicies
// and RBAC of deploy/ let the controller's ServiceAccount make each write the design makes and
// deny every other: foreign Secrets, Composition spec and metadata, foreign slice names in the
// status, slices that are not all tombstones, slice updates.
//
// The package is tests only.
package policy
