// Package reliability holds the reliability scenarios of tombstone recovery, run with the
// controller's k8s adapters on the in-memory API server (adapters/memory/apiserver): crash
// consistency of multi-Secret snapshot replacement and of the hand-off of tombstones to Eno,
// several controller instances racing over one cluster while syntheses change, and hostile or
// broken input. Eno is the simulation's model of stock Eno v0.2.17 (adapters/memory/enomodel:
// synthesis carrying tombstones, forced resynthesis, reconciliation downstream), so every
// scenario follows the hand-off through to the objects Eno deletes.
//
// The package is tests only. They may import domain, ports, app and the adapters.
package reliability
