package domain

import (
	"fmt"
	"slices"
)

// ReadOutage is nil when the failed reads of a plan (ObjectReadFailed) may be kept as Unreadable:
// another read was answered, so the failure is the object's own and must not stall recovery.
// When every read failed it is the first, in canonical order: the plan is retried, so an outage
// never finishes as Unverified (design §6.3, read outage).
func ReadOutage(observed map[ResourceID]Observation) error {
	var failed []ResourceID
	for id, o := range observed {
		if o.State != ObjectReadFailed {
			return nil
		}
		failed = append(failed, id)
	}
	if len(failed) == 0 {
		return nil
	}
	first := slices.MinFunc(failed, ResourceID.Compare)
	return fmt.Errorf("every one of the %d downstream reads of the plan failed, so none is kept as unreadable and the plan is retried; the first, %s: %s", len(failed), first, observed[first].Detail)
}
