package domain

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// ObjectWrite is one managedFields entry of a downstream object's main resource: who, and when.
type ObjectWrite struct {
	Manager string
	// Time is zero when the entry carries none (an identical apply may leave it so): unknown.
	Time time.Time
}

// DefaultEnoManagers are the field managers Eno v0.2.17's eno-reconciler writes with: "eno" for
// server-side apply, and "eno-reconciler", its user agent, which kube-apiserver names for every
// write without a field manager (SSA disabled, Replace, Patch resources) (design §6.3).
var DefaultEnoManagers = []string{"eno", "eno-reconciler"}

// fieldManagerName passes no manager name that could end a CEL string literal.
var fieldManagerName = lazyRegexp(`^[A-Za-z0-9:._/-]{1,128}$`)

// EnoManagers are the field managers whose writes are Eno's; every other manager of an object's
// main resource makes it co-managed (design §6.3). The zero value is DefaultEnoManagers.
type EnoManagers struct{ names []string }

// NewEnoManagers validates names: at least one, each one a precondition can quote.
func NewEnoManagers(names []string) (EnoManagers, error) {
	if len(names) == 0 {
		return EnoManagers{}, fmt.Errorf("at least one field manager of Eno is needed")
	}
	for _, n := range names {
		if !fieldManagerName().MatchString(n) {
			return EnoManagers{}, fmt.Errorf("%q is not a field manager name (letters, digits, and any of :._/-; at most 128)", n)
		}
	}
	return EnoManagers{names: slices.Clone(names)}, nil
}

// Names are the managers, DefaultEnoManagers for the zero value.
func (m EnoManagers) Names() []string {
	if len(m.names) == 0 {
		return DefaultEnoManagers
	}
	return m.names
}

func (m EnoManagers) String() string { return strings.Join(m.Names(), ",") }

// Set parses a comma-separated list (flag.Value).
func (m *EnoManagers) Set(s string) error {
	names := strings.Split(s, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	parsed, err := NewEnoManagers(names)
	if err == nil {
		*m = parsed
	}
	return err
}

// The fields of an object no manager owns: what every object has, and what kube-apiserver sets
// itself without a managedFields entry (measured, design §6.3). Anything else some write put.
var (
	bareTopLevel = []string{"apiVersion", "kind", "metadata", "status"}
	bareMetadata = []string{"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
		"deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "labels"}
	// bareLabels: the label kube-apiserver sets on every Namespace.
	bareLabels = []string{"kubernetes.io/metadata.name"}
	// bareSpec: the spec kube-apiserver gives every Namespace.
	bareSpec = map[string]any{"finalizers": []any{"kubernetes"}}
)

// IsBare reports whether obj, as the API server returns it, holds no field any manager could
// own: besides apiVersion, kind and status, only null fields and what the server sets itself (a
// Namespace's spec and label, identity metadata). Without managedFields such an object loses
// nothing of anyone's; one with content had its history stripped, and is kept (design §6.3).
func IsBare(obj map[string]any) bool {
	for k, v := range obj {
		if v != nil && !slices.Contains(bareTopLevel, k) && !(k == "spec" && reflect.DeepEqual(v, bareSpec)) {
			return false
		}
	}
	meta, _ := obj["metadata"].(map[string]any)
	for k := range meta {
		if !slices.Contains(bareMetadata, k) {
			return false
		}
	}
	labels, _ := meta["labels"].(map[string]any)
	for k := range labels {
		if !slices.Contains(bareLabels, k) {
			return false
		}
	}
	return true
}

// celBare is IsBare as a CEL condition on `self`.
func celBare() string {
	return `self.all(k, k in ` + celStrings(bareTopLevel) + ` || self[k] == null || (k == "spec" && self.spec == {"finalizers": ["kubernetes"]})) && ` +
		`self.metadata.all(k, k in ` + celStrings(bareMetadata) + `) && ` +
		`(!has(self.metadata.labels) || self.metadata.labels.all(l, l in ` + celStrings(bareLabels) + `))`
}

func celStrings(s []string) string { return `["` + strings.Join(s, `", "`) + `"]` }

// ownership judges a present object's writes against the history's write time (design §6.3):
// each must be Eno's (else ManagedElsewhere) and no later than the history (a time unknown too:
// ChangedAfterHistory); without any, the object must be bare (else Unreadable). ok: tombstone it.
func ownership(o Observation, eno EnoManagers, writeTime time.Time) (reason DropReason, detail string, ok bool) {
	if len(o.Writes) == 0 {
		if o.Bare {
			return DropReason{}, "", true
		}
		return DropUnreadable, "it has content but no managedFields: its write history was stripped", false
	}
	for _, w := range o.Writes {
		if !slices.Contains(eno.Names(), w.Manager) {
			return DropManagedElsewhere, fmt.Sprintf("field manager %q manages it", w.Manager), false
		}
	}
	for _, w := range o.Writes {
		switch {
		case w.Time.IsZero():
			return DropChanged, fmt.Sprintf("the managedFields entry of %q carries no time: when it was written is unknown", w.Manager), false
		case w.Time.Truncate(time.Second).After(writeTime.Truncate(time.Second)):
			return DropChanged, fmt.Sprintf("written %s by %q, history written %s", w.Time.UTC().Format(time.RFC3339), w.Manager, writeTime.UTC().Format(time.RFC3339)), false
		}
	}
	return DropReason{}, "", true
}
