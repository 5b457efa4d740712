package k8s

import (
	"fmt"

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
