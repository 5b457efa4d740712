//go:build race

package resilience_test

// raceEnabled builds the controller binary with -race when the tests run with it, so a data
// race in either process fails the concurrency scenario (exit code 66 instead of 0).
const raceEnabled = true
