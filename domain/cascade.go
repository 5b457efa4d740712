package domain

import (
	"fmt"
	"strings"
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

// Cascades says what deleting the object of id deletes besides it, or "" when its kind is not
// one whose deletion cascades (design §6.3).
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
	for _, t := range tombstones {
		if what := Cascades(t.Entry.ID()); what != "" {
			dropped = append(dropped, DroppedTombstone{Tombstone: t, Reason: DropCascading,
				Detail: fmt.Sprintf("deleting it also deletes %s; never handed to Eno, after looking: %s", what, KubectlDelete(t.Entry.ID()))})
			continue
		}
		rest = append(rest, t)
	}
	return rest, dropped
}
