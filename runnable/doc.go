// Package runnable is the tombstone recovery controller as a guest of a controller-runtime
// manager: SetupWithManager adds it to eno-reconciler's manager (design §8.2) or to the
// standalone binary's, which `run` builds with ctrl.NewManager.
//
// It holds the wiring: clients for both clusters, the controller's own cache of the shard's
// Compositions, a downstream cluster.Cluster whose cache holds our inventory Secrets as
// metadata, the adapters of adapters/k8s and adapters/metrics, app's Service, and an unmanaged
// controller-runtime controller whose reconcile is app.Service.Reconcile. The guest runs on the
// manager's leader only and never returns an error to it: a failure is logged and the guest
// starts again after a backoff. It may import domain, ports, app, the adapters, client-go,
// apimachinery, controller-runtime, logr and prometheus/client_golang; only cmd imports it.
package runnable
