package app

import (
	"errors"
	"fmt"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// ForeignSecretError: a Secret that is not ours sits at a chunk's name. Nothing was written.
type ForeignSecretError struct {
	Namespace string
	Name      string
}

func (e *ForeignSecretError) Error() string {
	return fmt.Sprintf("secret %s/%s is not managed by %s (label %s or type %s missing); refusing to overwrite it — rename or remove it by hand",
		e.Namespace, e.Name, domain.ManagedByValue, domain.LabelManagedBy, domain.SecretType)
}

// LineageCollisionError: a Secret of ours at a chunk's name holds the history of another
// Composition that exists, or is in another namespace while adoption across namespaces is off
// (one name in two namespaces, or names cut at 253 characters). Nothing was written.
type LineageCollisionError struct {
	Namespace string
	Name      string
	// Other is the Composition the Secret was recorded for; Lineage is the Secret's lineage label.
	Other   domain.CompositionRef
	Lineage string
	// OtherNamespace: refused because Other is in another namespace, whether it exists or not.
	OtherNamespace bool
	// OtherControlPlane: refused because that control plane wrote the Secret (design §4).
	OtherControlPlane string
}

func (e *LineageCollisionError) Error() string {
	if e.OtherControlPlane != "" {
		return fmt.Sprintf("secret %s/%s holds the inventory of composition %s (lineage %q) written by control plane %s, not this one; refusing to overwrite it — prune it from that control plane once its Composition is gone there, or give this one its own %s annotation",
			e.Namespace, e.Name, e.Other, e.Lineage, e.OtherControlPlane, domain.AnnotationLineageOverride)
	}
	if e.OtherNamespace {
		return fmt.Sprintf("secret %s/%s holds the inventory of composition %s (lineage %q) in another namespace, and adoption across namespaces is off (--allow-cross-namespace-lineage); refusing to overwrite it — give one of them its own %s annotation",
			e.Namespace, e.Name, e.Other, e.Lineage, domain.AnnotationLineageOverride)
	}
	return fmt.Sprintf("secret %s/%s holds the inventory of composition %s (lineage %q), which exists; refusing to overwrite it — give one of them its own %s annotation",
		e.Namespace, e.Name, e.Other, e.Lineage, domain.AnnotationLineageOverride)
}

// StaleCompositionError: the live recheck before a write found the Composition recreated,
// resynthesized or no longer eligible. The write was not made; the next pass starts afresh.
type StaleCompositionError struct {
	Ref    domain.CompositionRef
	Detail string
}

func (e *StaleCompositionError) Error() string {
	return fmt.Sprintf("composition %s changed before the write (%s); aborted the pass", e.Ref, e.Detail)
}

// SourceDeletingError: another Composition that recorded snapshots of the lineage exists and is
// being deleted (Eno keeps it behind its finalizer while it cleans up). Nothing is decided; the
// pass is retried with backoff until it is gone.
type SourceDeletingError struct {
	Ref domain.CompositionRef
}

func (e *SourceDeletingError) Error() string {
	return fmt.Sprintf("composition %s, which recorded snapshots of this lineage, is being deleted; deciding once it is gone", e.Ref)
}

// isIneligible reports whether err only says the Composition is out of a use case's reach.
func isIneligible(err error) (*domain.IneligibleError, bool) {
	var ie *domain.IneligibleError
	ok := errors.As(err, &ie)
	return ie, ok
}
