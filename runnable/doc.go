// Package runnable is the tombstone recovery controller, ready to run inside another process:
// New builds it from Options, and Start runs it until its context ends. Start and
// NeedLeaderElection satisfy controller-runtime's Runnable and LeaderElectionRunnable
// structurally, so eno-reconciler adds it to its manager with mgr.Add (design §8.2) while this
// module never imports controller-runtime. The standalone binary's `run` command runs the same
// Controller.
//
// It holds the wiring: clients for both clusters, the informers of Compositions and inventory
// Secrets, the adapters of adapters/k8s and adapters/metrics, app's Service and work-queue
// Controller, and leader election with a Lease of its own. It may import domain, ports, app,
// the adapters, client-go, apimachinery, logr and prometheus/client_golang; only cmd imports it.
package runnable
