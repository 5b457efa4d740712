package ports

import (
	"errors"
)

// Adapters wrap these with %w so callers can act on them with errors.Is.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a resourceVersion precondition failed; another writer got there first.
	ErrConflict = errors.New("conflict: the object was modified since it was read")
	// ErrAlreadyExists: a create found the name taken.
	ErrAlreadyExists = errors.New("already exists")
	// ErrForbidden: the API server refused the request for lack of permission.
	ErrForbidden = errors.New("forbidden")
	// ErrSynthesisMoved: a hand-off step found the Composition's synthesis changed, or one in
	// flight; nothing was committed and the next reconcile decides again.
	ErrSynthesisMoved = errors.New("the composition's synthesis moved on")
	// ErrIndexBehind: the fleet index had not seen a write in time; the pass is retried.
	ErrIndexBehind = errors.New("the fleet index has not caught up")
	// ErrOutsideInventoryNamespace: a Secret write named another namespace; the store refuses it.
	ErrOutsideInventoryNamespace = errors.New("secret is outside the inventory namespace")
)
