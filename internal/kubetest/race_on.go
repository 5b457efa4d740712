//go:build race

package kubetest

// RaceEnabled reports whether the tests run with -race, so that a binary built for them can be
// too: a data race in the binary then fails the run (exit code 66 instead of 0).
const RaceEnabled = true
