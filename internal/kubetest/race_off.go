//go:build !race

package kubetest

// RaceEnabled reports whether the tests run with -race.
const RaceEnabled = false
