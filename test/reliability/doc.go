// Package reliability holds the reliability scenarios of tombstone recovery, run against the
// in-memory adapter: crash consistency of multi-Secret snapshot replacement and of the hand-off
// of tombstones to Eno, several controller instances racing over one cluster while syntheses
// change, and hostile or broken input. Eno is the memory adapter's model of stock Eno v0.2.17
// (synthesis carrying tombstones, forced resynthesis, reconciliation downstream), so every
// scenario follows the hand-off through to the objects Eno deletes.
//
// The package is tests only. They may import domain, ports, app and adapters/memory.
package reliability
