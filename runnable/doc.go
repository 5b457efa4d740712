// Package runnable is the tombstone recovery controller as a guest of a controller-runtime
// manager: SetupWithManager adds it to eno-reconciler's manager (design §8.2) or to the
// standalone binary's, which `run` builds with ctrl.NewManager.
//
// It holds the wiring: clients for both clusters, one builder chain of a controller whose
// reconcile is app.Service.Reconcile over the host's Composition cache (or its own, standalone),
// a downstream cache of our inventory Secrets as metadata, the fleet index, and the
// adapters of adapters/k8s and adapters/metrics. What it adds runs on the manager's leader only
// and never returns an error to it. It may import domain, ports, app, the adapters, client-go,
// apimachinery, controller-runtime, logr and prometheus/client_golang; only cmd imports it.
package runnable
