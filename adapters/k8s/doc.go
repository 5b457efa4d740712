// Package k8s implements the ports with client-go: Compositions and ResourceSlices on the
// control plane (read as unstructured through the dynamic client, so there is no dependency on
// Eno's Go module), inventory Secrets in the downstream cluster (typed CoreV1 client), and events.
//
// Kubernetes types stop here: private functions convert unstructured objects and corev1.Secrets
// to and from the domain's value objects. API errors the use cases act on are mapped to the
// typed errors of ports (NotFound, Conflict, AlreadyExists), with the original kept in the chain.
//
// Constructors start no goroutines. Informers run from Start(ctx) until ctx is cancelled;
// Wait blocks until they have stopped. The event recorder is started by StartRecorder and
// stopped by Shutdown or by cancelling its context.
//
// It may import domain, ports, k8s.io/client-go, k8s.io/apimachinery, k8s.io/api and
// github.com/go-logr/logr, besides the standard library. It never deletes anything.
package k8s
