// Package domain holds the rules of tombstone recovery: inventories, lineages,
// chunks, snapshots, eligibility and recovery decisions (design §3–§6).
//
// It imports only the standard library. Nothing here performs I/O; adapters
// convert their storage types to and from the value objects defined here.
package domain
