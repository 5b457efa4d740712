// Package install checks, on a real API server (internal/kubetest), the install paths of the
// README: each kustomize base and overlay of deploy/, rendered by the kustomize CLI that
// `make kustomize` installs in bin/ (not a module dependency, design §8.1), is accepted by
// server-side apply and holds what it promises.
//
// The package is tests only.
package install
