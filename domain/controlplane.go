package domain

import (
	"fmt"
	"regexp"
	"sync"
)

// lazyRegexp compiles expr on first use, not at the process's start: a replica that never leads
// (inside eno-reconciler) never compiles it.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

var controlPlanePattern = lazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// ValidControlPlane checks a control plane's name: a kube-system UID or --control-plane-id (§3).
func ValidControlPlane(id string) error {
	if !controlPlanePattern().MatchString(id) {
		return fmt.Errorf("control plane %q is not 1-63 letters, digits, '.', '_' or '-', starting and ending alphanumeric", truncate(id, 80))
	}
	return nil
}

// WrittenBy is the control plane s names, "" for none (not ours, or written before they were).
func (s ChunkSecret) WrittenBy() string { return s.Annotations[AnnotationControlPlane] }

// OwnHistory keeps, of a lineage's Secrets, those controlPlane wrote, those not ours (reading
// refuses them) and those naming no control plane. A Secret another control plane wrote means it
// records the lineage too, with a Composition not readable from here: SharedLineage, returning
// only the Secrets controlPlane wrote and those not ours (prune keeps the unnamed) (design §3).
func OwnHistory(secrets []ChunkSecret, controlPlane string) ([]ChunkSecret, error) {
	var own, named []ChunkSecret
	var other *ChunkSecret
	for i, s := range secrets {
		switch by := s.WrittenBy(); {
		case by == controlPlane || !s.Owned():
			own, named = append(own, s), append(named, s)
		case by == "":
			own = append(own, s)
		default:
			other = &secrets[i]
		}
	}
	if other == nil {
		return own, nil
	}
	return named, &InventoryInvalidError{Reason: ReasonSharedLineage, Secret: other.Name, Detail: fmt.Sprintf("was written by control plane %s, "+
		"which records this lineage too: its Composition cannot be read from here, so this lineage's history is not read", truncate(other.WrittenBy(), 80))}
}
