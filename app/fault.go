//go:build !tombstonerecovery_faults

package app

import (
	"context"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// fault marks a point where the acceptance tests inject a failure (a panic, a crash of the
// process) into a build made with the tombstonerecovery_faults tag (fault_injection.go). In
// every other build, this one included, it does nothing and compiles away: no variable or
// setting can reach it.
func fault(context.Context, faultPoint, domain.CompositionRef) {}
