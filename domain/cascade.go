package domain

import (
	"fmt"
	"iter"
	"maps"
)

// cascadingKinds are the kinds whose deletion deletes other objects, with what it takes
// (design §6.3, N1). A tombstone of one is never handed to Eno without review.
var cascadingKinds = map[[2]string]string{
	{"", "Namespace"}: "every object in the namespace",
	{"apiextensions.k8s.io", "CustomResourceDefinition"}: "every custom resource of the definition",
	{"apiregistration.k8s.io", "APIService"}:             "the API it serves, and every object behind it",
	{"", "PersistentVolumeClaim"}:                        "its bound volume and the data on it (a Delete reclaim policy)",
	{"", "ServiceAccount"}:                               "its token Secrets",
}

// Cascades says what deleting the object of id deletes besides it, or "" when its kind is not
// one whose deletion cascades (design §6.3, N1).
func Cascades(id ResourceID) string {
	return cascadingKinds[[2]string{id.Group, id.Kind}]
}

// DeployedInto names what still deploys into the namespace that a Namespace tombstone of id
// would delete: an object the synthesis produces or patches in it, else one that a slice of
// another Composition applies or patches there (elsewhere, ProducedElsewhere's map). It is ""
// when nothing does, or when id is not a Namespace. Such a Namespace is never tombstoned, and no
// approval overrides that: its deletion would take the living objects with it (design §6.3).
func DeployedInto(id ResourceID, synthesis SynthesisContents, elsewhere map[ResourceID]string) string {
	if id.Group != "" || id.Kind != "Namespace" || id.Namespace != "" {
		return ""
	}
	if p, ok := firstInNamespace(id.Name, maps.Keys(synthesis.produced), maps.Keys(synthesis.patched)); ok {
		return fmt.Sprintf("this composition's synthesis deploys %s into it", p)
	}
	if p, ok := firstInNamespace(id.Name, maps.Keys(elsewhere)); ok {
		return fmt.Sprintf("resource slice %s of another composition deploys %s into it", elsewhere[p], p)
	}
	return ""
}

// firstInNamespace is the first identity of the sets in namespace ns, in canonical order.
func firstInNamespace(ns string, sets ...iter.Seq[ResourceID]) (first ResourceID, found bool) {
	for _, set := range sets {
		for p := range set {
			if p.Namespace == ns && (!found || p.Compare(first) < 0) {
				first, found = p, true
			}
		}
	}
	return first, found
}

// splitDeployedInto drops the tombstones of Namespaces something still deploys into
// (DeployedInto), keeping the order given.
func splitDeployedInto(tombstones []Tombstone, synthesis SynthesisContents, elsewhere map[ResourceID]string) (rest []Tombstone, dropped []DroppedTombstone) {
	for _, t := range tombstones {
		if why := DeployedInto(t.Entry.ID(), synthesis, elsewhere); why != "" {
			dropped = append(dropped, DroppedTombstone{Tombstone: t, Reason: DropDeployedInto, Detail: why})
			continue
		}
		rest = append(rest, t)
	}
	return rest, dropped
}

// cascading are the tombstones whose deletion cascades (Cascades), in the order given.
func cascading(tombstones []Tombstone) []Tombstone {
	var out []Tombstone
	for _, t := range tombstones {
		if Cascades(t.Entry.ID()) != "" {
			out = append(out, t)
		}
	}
	return out
}
