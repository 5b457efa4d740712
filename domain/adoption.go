package domain

import (
	"fmt"
	"slices"
	"strings"
)

// Adoption says whether a Composition may take history recorded in another namespace as its
// own (--allow-cross-namespace-lineage). A lineage override is only an annotation: without this
// switch, anyone who can write Compositions in one namespace could adopt another namespace's
// history and have Eno delete its orphans (design §5 step 3).
type Adoption struct{ name string }

var (
	// AdoptWithinNamespace: only history recorded in the Composition's own namespace. The
	// default, and what the zero Adoption means.
	AdoptWithinNamespace = Adoption{"within-namespace"}
	// AdoptAcrossNamespaces: a Composition with no history of its own may adopt any namespace's.
	AdoptAcrossNamespaces = Adoption{"across-namespaces"}
)

// Permits reports whether history recorded for recordedFor may become reader's: always within
// one namespace, across them only when allowed; asked of every snapshot and replaced Secret.
func (a Adoption) Permits(reader, recordedFor CompositionRef) bool {
	return reader.Namespace == recordedFor.Namespace || a == AdoptAcrossNamespaces
}

// OtherNamespaceError stops reading when every snapshot of a lineage was recorded in another
// namespace and adoption across namespaces is off: NothingToRecover, reason OtherNamespace.
type OtherNamespaceError struct {
	// Namespaces are those the lineage's snapshots were recorded in, sorted.
	Namespaces []string
}

func (e *OtherNamespaceError) Error() string {
	return fmt.Sprintf("every snapshot of the lineage was recorded in another namespace (%s) and adoption across namespaces is off (--allow-cross-namespace-lineage); that history is not this composition's",
		strings.Join(e.Namespaces, ", "))
}

// namespacesOf lists the distinct namespaces the snapshots were recorded for, sorted.
func namespacesOf(uuids []string, groups map[string][]StoredChunk) []string {
	out := make([]string, len(uuids))
	for i, uuid := range uuids {
		out[i] = groups[uuid][0].Meta.CompositionNamespace
	}
	slices.Sort(out)
	return slices.Compact(out)
}
