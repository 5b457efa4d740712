// Package reliability holds the reliability scenarios of tombstone recovery, run against the
// in-memory adapter: crash consistency of multi-Secret snapshot replacement, several controller
// instances racing over one cluster while syntheses change, and hostile or broken input.
//
// The package is tests only. They may import domain, ports, app and adapters/memory.
package reliability
