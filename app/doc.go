// Package app holds the use cases of tombstone recovery — Record (design §4), Recover (design §6),
// Reconcile, which runs both in order, Plan, a dry run, and Inspect, the read-only report of
// `inspect` (design §9) — plus the controller loop that drains a work queue. It is the surface
// eno-reconciler wires in.
//
// It imports domain, ports, logr and the standard library; adapters are injected through Deps.
package app
