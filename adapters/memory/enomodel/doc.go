// Package enomodel is the one model of stock Eno v0.2.17 this project tests against, acting
// through the API on the in-memory API server (adapters/memory/apiserver): Eno's controllers
// step by step (Eno, Reconciler) for the simulation (test/sim) to interleave with the
// controller, and whole moves (Env) for the demo and test/reliability. ApplyOverrides is how
// Eno reads a resource's eno.azure.io/overrides.
package enomodel
