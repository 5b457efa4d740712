// Package k8s implements the ports with client-go: Compositions and ResourceSlices on the
// control plane (read as unstructured through the dynamic client, so there is no dependency on
// Eno's Go module), inventory Secrets in the downstream cluster (typed CoreV1 client), and events.
//
// Kubernetes types stop here: private functions convert unstructured objects and corev1.Secrets
// to and from the domain's value objects. API errors the use cases act on are mapped to the
// typed errors of ports (NotFound, Conflict, AlreadyExists), with the original kept in the chain.
//
// Constructors start no goroutines, and nothing here runs a cache: the caches the cached reads
// go through (a Composition lister, CachedSecrets) and the event recorder are the caller's
// (runnable keeps them in controller-runtime).
//
// It may import domain, ports, k8s.io/client-go, k8s.io/apimachinery, k8s.io/api and
// github.com/go-logr/logr, besides the standard library. It never deletes anything.
package k8s
