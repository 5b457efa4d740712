package domain

import (
	"fmt"
	"strings"
	"time"
)

// cascadingKinds are the kinds whose deletion deletes other objects, with what it takes (design
// §6.3). Recovery never hands one to Eno: no check before the hand-off can bind a synthesis that
// does not exist yet (R1), so an operator deletes it after looking.
var cascadingKinds = map[[2]string]string{
	{"", "Namespace"}: "every object in the namespace",
	{"apiextensions.k8s.io", "CustomResourceDefinition"}: "every custom resource of the definition",
	{"apiregistration.k8s.io", "APIService"}:             "the API it serves, and every object behind it",
	{"", "PersistentVolume"}:                             "its storage and the data on it (a Delete reclaim policy)",
	{"", "PersistentVolumeClaim"}:                        "its bound volume and the data on it (a Delete reclaim policy)",
	{"", "ServiceAccount"}:                               "its token Secrets, whoever created them, and the API access of every Pod that runs as it",
}

// Cascades says what deleting the object of id deletes besides it, or "" (design §6.3).
func Cascades(id ResourceID) string {
	return cascadingKinds[[2]string{id.Group, id.Kind}]
}

// KubectlDelete is the command that deletes the object of id, for an operator to run after looking.
func KubectlDelete(id ResourceID) string {
	kind := strings.ToLower(id.Kind)
	if id.Group != "" {
		kind += "." + id.Group
	}
	if id.Namespace == "" {
		return fmt.Sprintf("kubectl delete %s %s", kind, id.Name)
	}
	return fmt.Sprintf("kubectl delete %s %s -n %s", kind, id.Name, id.Namespace)
}

// splitCascading drops the tombstones whose deletion cascades (CascadingKind), keeping the order
// given; each names what it takes and the command an operator may run after looking.
func splitCascading(tombstones []Tombstone) (rest []Tombstone, dropped []DroppedTombstone) {
	return splitOff(tombstones, DropCascading, func(t Tombstone) string {
		if what := Cascades(t.Entry.ID()); what != "" {
			return fmt.Sprintf("deleting it also deletes %s; never handed to Eno, after looking: %s", what, KubectlDelete(t.Entry.ID()))
		}
		return ""
	})
}

// ResourceFilter says why no eno-reconciler in use would load a tombstone's manifest for comp,
// or nil: Eno's --resource-filter, as its resource cache evaluates it (design §6.3). Nil loads all.
type ResourceFilter func(manifest string, comp Composition) error

// splitUntaken drops the tombstones no eno-reconciler in use would load (NoReconcilerTakesIt):
// Eno would carry each into every later synthesis, and the Composition would never be Ready.
func splitUntaken(ts []Tombstone, in RecoveryInput, written time.Time) (rest []Tombstone, dropped []DroppedTombstone, err error) {
	if in.ResourceFilter == nil {
		return ts, nil, nil
	}
	// The digest of the set before this split: only a filter on the overrides could tell.
	digest := handoffDigest(in.Composition.Synthesis.UUID, written, ts)
	for _, t := range ts {
		m, err := selfCheckingManifest(t, in.EnoManagers, written, digest)
		if err != nil {
			return nil, nil, err
		}
		if why := in.ResourceFilter(m, in.Composition); why != nil {
			dropped = append(dropped, DroppedTombstone{Tombstone: t, Reason: DropNoReconciler, Detail: why.Error()})
			continue
		}
		rest = append(rest, t)
	}
	return rest, dropped, nil
}
