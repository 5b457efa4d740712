package kubetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMainWithEnv is a package's TestMain: it starts an environment, calls run (which normally
// stores env and returns m.Run(); nil means just m.Run()), stops the environment, checks for
// leaked goroutines with goleak and exits. A start failure prints the error with the processes'
// output and exits 1, so a missing binary fails the package instead of skipping it.
//
// The goroutine check runs after Stop because client connections end only when the server is
// gone; goroutines alive before the call (package init) are ignored.
func TestMainWithEnv(m *testing.M, opts Options, run func(env *Env) int) {
	os.Exit(testMainWithEnv(m, opts, run))
}

func testMainWithEnv(m *testing.M, opts Options, run func(env *Env) int) int {
	preexisting := goleak.IgnoreCurrent()

	ctx, cancel := context.WithTimeout(context.Background(), defaultStartTimeout)
	began := time.Now()
	env, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: could not start the test API server: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "kubetest: API server ready at %s in %.1fs\n", env.host, time.Since(began).Seconds())

	var code int
	func() {
		// A panic outside a test still stops the processes before it propagates.
		defer func() {
			if stopErr := env.Stop(); stopErr != nil {
				fmt.Fprintf(os.Stderr, "FAIL: %v\n", stopErr)
				if code == 0 {
					code = 1
				}
			}
		}()
		if run == nil {
			code = m.Run()
		} else {
			code = run(env)
		}
	}()

	if code == 0 {
		if err := findLeaks(append([]goleak.Option{preexisting}, opts.Goleak...), opts.Settle); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: goleak: goroutines leaked by the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// findLeaks is goleak.Find, tried again every second for up to settle.
func findLeaks(opts []goleak.Option, settle time.Duration) error {
	deadline := time.Now().Add(settle)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}
