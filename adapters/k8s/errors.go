package k8s

import (
	"fmt"
	"runtime/debug"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/Azure/eno-tombstone-recovery/ports"
)

// apiError describes a failed API call. NotFound, Conflict, AlreadyExists and Forbidden become
// the typed errors of ports; the API server's error stays in the chain for apierrors helpers.
func apiError(what string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", what, ports.ErrNotFound, err)
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s: %w: %w", what, ports.ErrConflict, err)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s: %w: %w", what, ports.ErrAlreadyExists, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %w: %w", what, ports.ErrForbidden, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// PanicHandler receives a panic recovered in an event handler, with the stack where it happened.
type PanicHandler func(recovered any, stack []byte)

// recoverInto recovers a panic of the calling function and hands it to h. It must be deferred
// directly.
func recoverInto(h PanicHandler) {
	if r := recover(); r != nil && h != nil {
		h(r, debug.Stack())
	}
}
