//go:build race

package e2e

// raceEnabled builds the binary under test with -race when the tests run with it, so a data
// race in the controller fails the run (exit code 66 instead of 0).
const raceEnabled = true
