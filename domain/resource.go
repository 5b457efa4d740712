package domain

import (
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"
)

// ResourceID is a resource's identity across API versions: (group, kind, namespace, name).
type ResourceID struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

func (id ResourceID) String() string {
	gk := id.Kind
	if id.Group != "" {
		gk = id.Kind + "." + id.Group
	}
	if id.Namespace == "" {
		return gk + "/" + id.Name
	}
	return gk + "/" + id.Namespace + "/" + id.Name
}

// Entry is one resource of an inventory: identity and deletion metadata only.
type Entry struct {
	Group       string            `json:"group,omitempty"`
	Version     string            `json:"version,omitempty"`
	Kind        string            `json:"kind,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Name        string            `json:"name,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ID returns the entry's identity.
func (e Entry) ID() ResourceID {
	return ResourceID{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
}

func (e Entry) clone() Entry {
	e.Labels = maps.Clone(e.Labels)
	e.Annotations = maps.Clone(e.Annotations)
	return e
}

// APIVersion joins group and version the way manifests spell it.
func (e Entry) APIVersion() string {
	if e.Group == "" {
		return e.Version
	}
	return e.Group + "/" + e.Version
}

func (e Entry) validate() error {
	switch {
	case e.Version == "":
		return fmt.Errorf("entry %s has no version", e.ID())
	case e.Kind == "":
		return fmt.Errorf("entry %s has no kind", e.ID())
	case e.Name == "":
		return fmt.Errorf("entry %s has no name", e.ID())
	}
	for k := range e.Annotations {
		if k != AnnotationReadinessGroup && k != AnnotationDeletionGroup {
			return fmt.Errorf("entry %s carries annotation %q, which inventories do not hold", e.ID(), k)
		}
	}
	// encoding/json writes invalid UTF-8 as \ufffd, which decodes to a different string: such an
	// entry could be written but its digest would never verify on read.
	if !e.validUTF8() {
		return fmt.Errorf("entry %q has a string that is not valid UTF-8", e.ID().String())
	}
	return nil
}

func (e Entry) validUTF8() bool {
	for _, s := range []string{e.Group, e.Version, e.Kind, e.Namespace, e.Name} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, m := range []map[string]string{e.Labels, e.Annotations} {
		for k, v := range m {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// splitAPIVersion splits "group/version" (or "version" for the core group).
func splitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

func compareEntries(a, b *Entry) int {
	if c := strings.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.Version, b.Version)
}
