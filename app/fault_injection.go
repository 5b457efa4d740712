//go:build tombstonerecovery_faults

package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The variables that arm the faults of a tombstonerecovery_faults build. Only the acceptance
// tests build with that tag; a default build has neither the variables nor the faults.
const (
	// faultPanicEnv is NAMESPACE/NAME: every recovery of that Composition panics at its start.
	faultPanicEnv = "ENO_TOMBSTONE_RECOVERY_FAULT_PANIC"
	// faultCrashEnv is POINT:MARKER: the first process of any that reaches POINT creates the
	// file MARKER and kills itself with SIGKILL (no cleanup, no Lease released); once MARKER
	// exists, POINT passes. POINT is one of the faultPoint values.
	faultCrashEnv = "ENO_TOMBSTONE_RECOVERY_FAULT_CRASH"
)

func fault(ctx context.Context, point faultPoint, ref domain.CompositionRef) {
	if point == faultRecover && os.Getenv(faultPanicEnv) == ref.String() {
		panic(fmt.Sprintf("injected fault: %s=%s", faultPanicEnv, ref))
	}
	at, marker, ok := strings.Cut(os.Getenv(faultCrashEnv), ":")
	if !ok || faultPoint(at) != point || marker == "" {
		return
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return
	}
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "injected fault: cannot create the marker; not crashing", "marker", marker)
		return
	}
	fmt.Fprintf(f, "pid %d crashed at %s reconciling %s\n", os.Getpid(), point, ref)
	_ = f.Close()
	logr.FromContextOrDiscard(ctx).Info("injected fault: crashing", "point", string(point), "composition", ref.String())
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not delivered late; nothing after this runs
}
