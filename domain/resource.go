package domain

import (
	"cmp"
	"fmt"
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

// Compare is the canonical order of identities: by group, kind, namespace, then name.
// Inventories, tombstones and every list of resources are in this order (design §3).
func (id ResourceID) Compare(o ResourceID) int {
	return cmp.Or(strings.Compare(id.Group, o.Group), strings.Compare(id.Kind, o.Kind),
		strings.Compare(id.Namespace, o.Namespace), strings.Compare(id.Name, o.Name))
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

// APIVersion joins group and version the way manifests spell it.
func (e Entry) APIVersion() string {
	if e.Group == "" {
		return e.Version
	}
	return e.Group + "/" + e.Version
}

// validateFields checks what an inventory entry must hold: the required fields, then only
// recorded annotations (the first foreign key in byte order is named).
func (e Entry) validateFields() error {
	if err := e.validateRequired(); err != nil {
		return err
	}
	foreign, found := "", false
	for k := range e.Annotations {
		if !IsRecordedAnnotation(k) && (!found || k < foreign) {
			foreign, found = k, true
		}
	}
	if found {
		return fmt.Errorf("entry %s carries annotation %q, which inventories do not hold", e.ID(), foreign)
	}
	return nil
}

// validUTF8 reports whether every string of the entry is valid UTF-8.
func (e *Entry) validUTF8() bool {
	for _, s := range [...]string{e.Group, e.Version, e.Kind, e.Namespace, e.Name} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, m := range [...]map[string]string{e.Labels, e.Annotations} {
		for k, v := range m {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

func (e Entry) validateRequired() error {
	switch {
	case e.Version == "":
		return fmt.Errorf("entry %s has no version", e.ID())
	case e.Kind == "":
		return fmt.Errorf("entry %s has no kind", e.ID())
	case e.Name == "":
		return fmt.Errorf("entry %s has no name", e.ID())
	}
	return nil
}

// splitAPIVersion splits "group/version" (or "version" for the core group).
func splitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

// compareEntries is the canonical order of entries: by identity, then version.
func compareEntries(a, b *Entry) int {
	return cmp.Or(a.ID().Compare(b.ID()), strings.Compare(a.Version, b.Version))
}
