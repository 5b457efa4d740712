package domain

import (
	"encoding/json"
	"slices"
	"strings"
)

// recordedAnnotations are Eno's per-resource annotations an inventory keeps: each decides how
// Eno acts on a tombstone, and Eno's own tombstones copy the old manifest whole (design §3).
var recordedAnnotations = [...]string{
	AnnotationReadinessGroup,
	AnnotationDeletionGroup,
	AnnotationDisableReconciliation,
	AnnotationDeletionStrategy,
	AnnotationFailOpen,
	AnnotationOverrides,
}

// IsRecordedAnnotation reports whether an inventory entry holds the annotation key.
func IsRecordedAnnotation(key string) bool { return slices.Contains(recordedAnnotations[:], key) }

// Disabled reports whether Eno could skip the entry's tombstone, so recovery never hands it
// one: recorded with reconciliation disabled, or with overrides that can set it, since Eno
// evaluates their condition against the new Composition when it acts. When in doubt, keep:
// overrides that do not parse count as disabling too (design §6.3, Disabled).
func (e Entry) Disabled() bool {
	if e.Annotations[AnnotationDisableReconciliation] == "true" {
		return true
	}
	raw, ok := e.Annotations[AnnotationOverrides]
	return ok && overridesCanDisable(raw)
}

// disablePath is the override path, one section a step, that writes the disabling annotation.
var disablePath = [...]string{"self", "metadata", "annotations", AnnotationDisableReconciliation}

// overridesCanDisable reports whether an override's path can write the disabling annotation:
// the key or any object above it. Anything not readable as Eno's override list counts as able to.
func overridesCanDisable(raw string) bool {
	var ops []struct {
		Path *string `json:"path"`
	}
	if err := json.Unmarshal([]byte(raw), &ops); err != nil {
		return true
	}
	for _, op := range ops {
		if op.Path == nil {
			return true
		}
		sections, ok := overridePathSections(*op.Path)
		if !ok || writesWithin(sections) {
			return true
		}
	}
	return false
}

// writesWithin reports whether a path made of sections can reach the disabling annotation: it
// is no longer than disablePath, and each of its sections names the same step or any step.
func writesWithin(sections []pathSection) bool {
	if len(sections) > len(disablePath) {
		return false
	}
	for i, s := range sections {
		if !s.any && s.name != disablePath[i] {
			return false
		}
	}
	return true
}

// pathSection is one step of an override path: a field or map key by name, or a step that may
// match any name (a wildcard, an array index or a matcher, which Eno applies to lists).
type pathSection struct {
	name string
	any  bool
}

// overridePathSections splits an override path as Eno's path language reads it: dotted fields
// and bracketed quoted keys, indexes, wildcards or matchers. ok is false for anything else.
func overridePathSections(path string) ([]pathSection, bool) {
	var out []pathSection
	s := strings.TrimSpace(path)
	for len(s) > 0 {
		switch c := s[0]; {
		case c == '.' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s = s[1:]
		case c == '[':
			end, sec, ok := bracketSection(s)
			if !ok {
				return nil, false
			}
			out = append(out, sec)
			s = s[end:]
		case isIdentStart(c):
			n := 1
			for n < len(s) && isIdentPart(s[n]) {
				n++
			}
			out = append(out, pathSection{name: s[:n]})
			s = s[n:]
		default:
			return nil, false
		}
	}
	return out, len(out) > 0
}

// bracketSection reads the bracketed step at the start of s, returning the index past it.
func bracketSection(s string) (int, pathSection, bool) {
	inner := strings.TrimLeft(s[1:], " \t")
	if len(inner) > 0 && (inner[0] == '"' || inner[0] == '\'') {
		key, n, ok := quotedString(inner)
		if !ok {
			return 0, pathSection{}, false
		}
		rest := strings.TrimLeft(inner[n:], " \t")
		if !strings.HasPrefix(rest, "]") {
			return 0, pathSection{}, false
		}
		return len(s) - len(rest) + 1, pathSection{name: key}, true
	}
	// An index, a wildcard or a matcher: it may address any element, so it matches any name.
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return 0, pathSection{}, false
	}
	return end + 1, pathSection{any: true}, true
}

// quotedString reads a string in single or double quotes with backslash escapes, as Eno's
// lexer accepts it, and unquotes it the way Eno does (a backslash keeps the next character).
func quotedString(s string) (string, int, bool) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 >= len(s) {
				return "", 0, false
			}
			i++
			b.WriteByte(s[i])
		case q:
			return b.String(), i + 1, true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, false
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }
