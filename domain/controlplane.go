package domain

import (
	"fmt"
	"regexp"
	"slices"
)

var controlPlanePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// ValidControlPlane checks a control plane's name as written into its Secrets: the UID of its
// kube-system Namespace, or an operator's --control-plane-id (design §3).
func ValidControlPlane(id string) error {
	if !controlPlanePattern.MatchString(id) {
		return fmt.Errorf("control plane %q is not 1-63 letters, digits, '.', '_' or '-', starting and ending alphanumeric", truncate(id, 80))
	}
	return nil
}

// WrittenBy is the control plane s names, "" for a Secret written before control planes were
// named (or not ours).
func (s ChunkSecret) WrittenBy() string {
	if !s.Owned() {
		return ""
	}
	return s.Annotations[AnnotationControlPlane]
}

// OwnHistory keeps, of a lineage's Secrets, those controlPlane may read and prune: the ones it
// wrote, those not ours (reading refuses them), and those that name no control plane, unless
// another control plane's Secret shares the lineage: then they could be that one's, and reading
// the lineage is refused as SharedLineage (a wrong deletion cannot be undone), while the
// Secrets controlPlane wrote are still returned (design §5).
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
	names := make([]string, len(unnamed))
	for i, s := range unnamed {
		names[i] = s.Name
	}
	slices.Sort(names)
	return own, &InventoryInvalidError{Reason: ReasonSharedLineage, Secret: names[0], Detail: fmt.Sprintf(
		"names no control plane (written before they were named) while control plane %s also records this lineage, so it may be that one's; "+
			"once it is gone from that control plane's history, delete it by hand", truncate(other, 80))}
}
