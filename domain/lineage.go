package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

const maxLineageLength = 40

// Lineage keys a Composition's inventory across recreations. It never includes the UID.
type Lineage struct {
	value string
}

// InvalidLineageError reports an unusable lineage override annotation.
type InvalidLineageError struct {
	Value  string
	Reason string
}

func (e *InvalidLineageError) Error() string {
	return fmt.Sprintf("lineage override %q is invalid: %s; fix the %s annotation", truncate(e.Value, 64), e.Reason, AnnotationLineageOverride)
}

// NewLineage validates a lineage: a DNS label of 1 to 40 characters.
func NewLineage(value string) (Lineage, error) {
	if err := validateDNSLabel(value, maxLineageLength); err != "" {
		return Lineage{}, &InvalidLineageError{Value: value, Reason: err}
	}
	return Lineage{value: value}, nil
}

// DefaultLineage is the first 12 hex characters of sha256("<namespace>/<name>").
func DefaultLineage(namespace, name string) Lineage {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return Lineage{value: hex.EncodeToString(sum[:])[:12]}
}

// LineageOf returns the Composition's lineage: the override when present, else the default.
func LineageOf(c Composition) (Lineage, error) {
	if v, ok := c.Annotations[AnnotationLineageOverride]; ok {
		return NewLineage(v)
	}
	return DefaultLineage(c.Namespace, c.Name), nil
}

func (l Lineage) String() string { return l.value }

// IsZero reports whether the lineage was never set.
func (l Lineage) IsZero() bool { return l.value == "" }

func validateDNSLabel(v string, max int) string {
	if v == "" {
		return "must not be empty"
	}
	if len(v) > max {
		return fmt.Sprintf("must be at most %d characters, has %d", max, len(v))
	}
	for i, c := range []byte(v) {
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && c != '-' {
			return fmt.Sprintf("character %q is not allowed (lowercase letters, digits and '-' only)", c)
		}
		if c == '-' && (i == 0 || i == len(v)-1) {
			return "must start and end with a lowercase letter or digit"
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
