package domain

import (
	"fmt"
	"regexp"
)

var controlPlanePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// ValidControlPlane checks a control plane's name: the UID of its kube-system Namespace, or an
// operator's --control-plane-id (design §3).
func ValidControlPlane(id string) error {
	if !controlPlanePattern.MatchString(id) {
		return fmt.Errorf("control plane %q is not 1-63 letters, digits, '.', '_' or '-', starting and ending alphanumeric", truncate(id, 80))
	}
	return nil
}

// WrittenBy is the control plane s names, "" for a Secret not ours or written before control
// planes were named.
func (s ChunkSecret) WrittenBy() string { return s.Annotations[AnnotationControlPlane] }

// OwnHistory keeps, of a lineage's Secrets, those controlPlane may read and prune: the ones it
// wrote, those not ours (reading refuses them), and those naming no control plane, unless
// another control plane's Secret shares the lineage: they may be that one's, so reading is
// refused as SharedLineage, and only the Secrets controlPlane wrote are returned (design §3).
func OwnHistory(secrets []ChunkSecret, controlPlane string) ([]ChunkSecret, error) {
	var own, unnamed []ChunkSecret
	other := ""
	for _, s := range secrets {
		switch by := s.WrittenBy(); {
		case by == controlPlane || !s.Owned():
			own = append(own, s)
		case by == "":
			unnamed = append(unnamed, s)
		default:
			other = by
		}
	}
	if other == "" || len(unnamed) == 0 {
		return append(own, unnamed...), nil
	}
	return own, &InventoryInvalidError{Reason: ReasonSharedLineage, Secret: unnamed[0].Name, Detail: fmt.Sprintf("names no control plane "+
		"(written before they were named) while control plane %s also records this lineage, so it may be that one's", truncate(other, 80))}
}
