// Command tombstone-recovery is the tombstone recovery controller for Eno.
//
//	tombstone-recovery run      the controller
//	tombstone-recovery demo     the whole story on in-memory adapters
//	tombstone-recovery inspect  snapshots, verdict and a dry run, read-only
//	tombstone-recovery approve  answer a recovery held for review (reject says no)
//	tombstone-recovery dismiss  dismiss what recoveries kept for a person
//	tombstone-recovery prune    inventory retention, run by an operator (dry run unless --confirm)
//	tombstone-recovery version  the build's version, revision and Go version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/eno-tombstone-recovery/cmd/tombstone-recovery/internal/demo"
)

const usage = `usage: tombstone-recovery <command> [flags]

commands:
  run       run the controller against a control plane and a downstream cluster
  demo      tell the whole story on in-memory adapters (no cluster needed)
  inspect   print the snapshots of a lineage, the verdict and a dry run (never writes)
  approve   show the recovery held for review on NAMESPACE/NAME, then approve it (your own credentials)
  reject    show the recovery held for review on NAMESPACE/NAME, then reject it (your own credentials)
  dismiss   show what recoveries kept for a person on NAMESPACE/NAME, then dismiss it (your own credentials)
  prune     list inventory Secrets nothing will read again; delete them with --confirm (your own credentials)
  version   print the version, revision and Go version of this build (-o json for JSON)

Run 'tombstone-recovery <command> -h' for a command's flags and exit codes. Every command exits 0
when it did what it says and 1 with one line on stderr when it did not; inspect --all exits 3 when
a row needs a person.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tombstone-recovery: "+oneLine(err))
		code := exitCode{code: 1}
		errors.As(err, &code)
		os.Exit(code.code)
	}
}

// exitNeedsPerson is inspect --all's exit code when a row needs a person: a result for scripts
// and cron jobs, not a failure.
const exitNeedsPerson = 3

// exitCode is an error that sets the process's exit code.
type exitCode struct {
	code int
	msg  string
}

func (e exitCode) Error() string { return e.msg }

var errUsage = errors.New("unknown command; run 'tombstone-recovery -h'")

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usage)
		if len(args) == 0 {
			return errors.New("a command is required")
		}
		return nil
	}
	switch args[0] {
	case "demo":
		if len(args) > 1 {
			if args[1] == "-h" || args[1] == "--help" {
				fmt.Fprintln(stderr, "usage: tombstone-recovery demo\n\nTells the whole story on in-memory adapters: no cluster, no flags.\n\nExit codes: 0 told; 1 a step did not go as told.")
				return nil
			}
			return fmt.Errorf("demo: takes no arguments, got %q", args[1:])
		}
		return demo.Run(ctx, stdout)
	case "run":
		return runController(ctx, args[1:], stderr)
	case "inspect":
		return inspector{now: time.Now}.run(ctx, args[1:], stdout, stderr)
	case "approve", "reject", "dismiss":
		return reviewer{inspector{now: time.Now}, os.Stdin}.run(ctx, args[0], args[1:], stdout, stderr)
	case "prune":
		return pruner{now: time.Now}.run(ctx, args[1:], stdout, stderr)
	case "version":
		return runVersion(args[1:], stdout, stderr)
	}
	return fmt.Errorf("%q: %w", args[0], errUsage)
}

// unlessHelp is a command's flag error, nil for -h: the help is printed, and the command did what it says.
func unlessHelp(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// oneLine keeps the exit reason to a single line.
func oneLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}
