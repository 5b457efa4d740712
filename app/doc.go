// Package app holds the use cases of tombstone recovery — Record (SPEC §4), Recover (§6),
// Reconcile, which runs both in order, Plan, a dry run, and Inspect, the read-only report of
// `inspect` (§9) — plus the controller loop that drains a work queue. It is the surface
// eno-reconciler wires in.
//
// It imports domain, ports, logr and the standard library; adapters are injected through Deps.
package app
