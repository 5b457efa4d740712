package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// manifestMeta is what a manifest says about itself, read as Kubernetes reads it.
type manifestMeta struct {
	APIVersion  string
	Kind        string
	Name        string
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	// patch is the raw patch object, and patchErr what made it ambiguous; read only for Patches.
	patch    []byte
	patchErr error
}

// readManifest reads a manifest's identity (apiVersion, kind, metadata's name, namespace, labels,
// annotations) with exact keys, as Kubernetes does. encoding/json folds case: for
// {"metadata":{"name":"a","Name":"b"}} it reads "b" where Kubernetes reads "a", so recovery could
// tombstone an object never deployed; a case-folded or repeated key is an error (design §4).
func readManifest(data []byte) (manifestMeta, error) {
	var m manifestMeta
	if !json.Valid(data) {
		return m, errors.New("manifest is not valid JSON")
	}
	var seen [4]bool
	err := eachMember(data, "manifest", func(key, val []byte) error {
		switch i, err := matchKey(key, topFields[:], &seen); {
		case i == 3 && err != nil:
			m.patchErr = err // only a Patch reads its patch
		case err != nil:
			return err
		case i == 0:
			return stringField(val, "apiVersion", &m.APIVersion)
		case i == 1:
			return stringField(val, "kind", &m.Kind)
		case i == 2:
			return m.readMetadata(val)
		case i == 3:
			m.patch = val
		}
		return nil
	})
	return m, err
}

var (
	topFields      = [...]string{"apiVersion", "kind", "metadata", "patch"}
	metadataFields = [...]string{"name", "namespace", "labels", "annotations"}
	patchFields    = [...]string{"apiVersion", "kind"}
)

func (m *manifestMeta) readMetadata(val []byte) error {
	if isNull(val) {
		return nil
	}
	var seen [4]bool
	return eachMember(val, "metadata", func(key, val []byte) error {
		switch i, err := matchKey(key, metadataFields[:], &seen); {
		case err != nil:
			return fmt.Errorf("metadata: %w", err)
		case i == 0:
			return stringField(val, "metadata.name", &m.Name)
		case i == 1:
			return stringField(val, "metadata.namespace", &m.Namespace)
		case i == 2:
			return readStringMap(val, "metadata.labels", nil, &m.Labels)
		case i == 3:
			return readStringMap(val, "metadata.annotations", IsRecordedAnnotation, &m.Annotations)
		}
		return nil
	})
}

// patchTarget reads a Patch's patch.apiVersion and patch.kind with exact keys.
func (m *manifestMeta) patchTarget() (apiVersion, kind string, err error) {
	if m.patchErr != nil {
		return "", "", m.patchErr
	}
	if m.patch == nil || isNull(m.patch) {
		return "", "", nil
	}
	var seen [4]bool
	err = eachMember(m.patch, "patch", func(key, val []byte) error {
		switch i, err := matchKey(key, patchFields[:], &seen); {
		case err != nil:
			return fmt.Errorf("patch: %w", err)
		case i == 0:
			return stringField(val, "patch.apiVersion", &apiVersion)
		case i == 1:
			return stringField(val, "patch.kind", &kind)
		}
		return nil
	})
	return apiVersion, kind, err
}

// matchKey returns the index of the field the raw key (quotes included) names, or -1. A key
// given twice, or one that differs from a field only by case (as encoding/json folds it), is
// an error, returned with that field's index: the two decoders would read different values.
func matchKey(raw []byte, fields []string, seen *[4]bool) (int, error) {
	key := raw[1 : len(raw)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		s, _ := readString(raw)
		key = []byte(s)
	}
	for i, f := range fields {
		if string(key) == f {
			if seen[i] {
				return i, fmt.Errorf("key %q is given twice", f)
			}
			seen[i] = true
			return i, nil
		}
		if bytes.EqualFold(key, []byte(f)) {
			return i, fmt.Errorf("key %q differs from %q only by case; Kubernetes reads keys case-sensitively", key, f)
		}
	}
	return -1, nil
}

// readString reads a JSON string (null reads as "") exactly as encoding/json does, else !ok.
func readString(val []byte) (s string, ok bool) {
	switch {
	case isNull(val):
		return "", true
	case val[0] != '"':
		return "", false
	}
	raw := val[1 : len(val)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw), true
	}
	// Escapes, or invalid UTF-8 that decodes as U+FFFD. val is a valid JSON string.
	return s, json.Unmarshal(val, &s) == nil
}

// stringField reads the string field named field into dst.
func stringField(val []byte, field string, dst *string) error {
	s, ok := readString(val)
	if !ok {
		return fmt.Errorf("%s is not a string", field)
	}
	*dst = s
	return nil
}

// readStringMap reads an object of strings (null reads as nil), keeping the keys keep accepts
// (all when nil). Keys are exact, as in any map; a key given twice keeps its last value in both
// decoders. The kept strings share one allocation, the object's own text.
func readStringMap(val []byte, field string, keep func(key string) bool, dst *map[string]string) error {
	if isNull(val) {
		*dst = nil
		return nil
	}
	var text string // val as a string, made once the first key is kept
	return eachMember(val, field, func(key, v []byte) error {
		name := key[1 : len(key)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			decoded, _ := readString(key)
			name = []byte(decoded)
		}
		if keep != nil && !keep(string(name)) {
			if !isNull(v) && v[0] != '"' {
				return fmt.Errorf("%s[%s] is not a string", field, key)
			}
			return nil
		}
		if text == "" {
			text = string(val)
		}
		k, _ := sharedString(text, val, key)
		s, ok := sharedString(text, val, v)
		if !ok {
			return fmt.Errorf("%s[%s] is not a string", field, key)
		}
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[k] = s
		return nil
	})
}

// sharedString reads JSON string sub, within val, as a substring of text (val's copy) if it can.
func sharedString(text string, val, sub []byte) (string, bool) {
	if len(sub) > 1 && sub[0] == '"' && bytes.IndexByte(sub, '\\') < 0 && utf8.Valid(sub) {
		off := cap(val) - cap(sub) // sub = val[off:off+len(sub)]
		return text[off+1 : off+len(sub)-1], true
	}
	return readString(sub)
}

func isNull(val []byte) bool { return string(val) == "null" }

// eachMember calls fn with the raw key (quotes included) and raw value of each member of the
// JSON object val, in order. val must be valid JSON (checked once by readManifest).
func eachMember(val []byte, field string, fn func(key, val []byte) error) error {
	i := skipSpace(val, 0)
	if i == len(val) || val[i] != '{' {
		return fmt.Errorf("%s is not a JSON object", field)
	}
	i = skipSpace(val, i+1)
	if val[i] == '}' {
		return nil
	}
	for {
		end := skipString(val, i)
		key := val[i:end]
		i = skipSpace(val, skipSpace(val, end)+1) // past ':'
		end = skipValue(val, i)
		if err := fn(key, val[i:end]); err != nil {
			return err
		}
		i = skipSpace(val, end)
		if val[i] == '}' {
			return nil
		}
		i = skipSpace(val, i+1) // past ','
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the index just past the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
