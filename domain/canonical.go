package domain

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// The canonical encoding must be byte-identical to encoding/json.Marshal of Entry (design §3).
// This hand-written encoder produces it without reflection or per-entry allocations;
// canonical_test.go and FuzzAppendEntryMatchesMarshal hold it to json.Marshal.

// jsonPlain marks the bytes json.Marshal copies unescaped on their own: printable ASCII and
// DEL, except '"', '\\' and the HTML-sensitive '<', '>', '&'. Bytes of multi-byte UTF-8
// sequences are false and take the slow path. 256 entries: a byte index needs no bounds check.
var jsonPlain = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as json.Marshal escapes it, and
// reports whether s was valid UTF-8.
func appendJSONString(dst []byte, s string) ([]byte, bool) {
	valid := true
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if jsonPlain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters and <, >, &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1: // invalid UTF-8
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			valid = false
		case r == '\u2028' || r == '\u2029': // valid JSON, but not valid JavaScript
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), valid
}

// kv is one label or annotation.
type kv struct{ k, v string }

// appendSortedPairs appends the pairs of m to dst in key (byte) order, the order in which
// json.Marshal writes map keys.
func appendSortedPairs(dst []kv, m map[string]string) []kv {
	n := len(dst)
	for k, v := range m {
		dst = append(dst, kv{k, v})
	}
	slices.SortFunc(dst[n:], func(a, b kv) int { return strings.Compare(a.k, b.k) })
	return dst
}

// Field names as json.Marshal writes them, each with its separator.
const (
	jsonGroup       = `"group":`
	jsonVersion     = `"version":`
	jsonKind        = `"kind":`
	jsonNamespace   = `"namespace":`
	jsonName        = `"name":`
	jsonLabels      = `"labels":`
	jsonAnnotations = `"annotations":`
)

// appendEntryJSON appends the entry with the identity fields of id and the given sorted
// labels and annotations, byte for byte as json.Marshal encodes that Entry: fields in
// declaration order, empty ones omitted. It reports whether every string was valid UTF-8.
func appendEntryJSON(dst []byte, id *Entry, labels, annotations []kv) ([]byte, bool) {
	valid, ok := true, true
	dst = append(dst, '{')
	open := len(dst)
	field := func(name string) {
		if len(dst) > open {
			dst = append(dst, ',')
		}
		dst = append(dst, name...)
	}
	str := func(s string) {
		dst, ok = appendJSONString(dst, s)
		valid = valid && ok
	}
	object := func(pairs []kv) {
		dst = append(dst, '{')
		for i, p := range pairs {
			if i > 0 {
				dst = append(dst, ',')
			}
			str(p.k)
			dst = append(dst, ':')
			str(p.v)
		}
		dst = append(dst, '}')
	}
	for _, f := range [...]struct{ name, v string }{
		{jsonGroup, id.Group}, {jsonVersion, id.Version}, {jsonKind, id.Kind},
		{jsonNamespace, id.Namespace}, {jsonName, id.Name},
	} {
		if f.v != "" {
			field(f.name)
			str(f.v)
		}
	}
	if len(labels) > 0 {
		field(jsonLabels)
		object(labels)
	}
	if len(annotations) > 0 {
		field(jsonAnnotations)
		object(annotations)
	}
	return append(dst, '}'), valid
}

// entryJSONSize is the length appendEntryJSON produces when no string needs escaping, and a
// lower bound otherwise: enough to size the buffer once for realistic inventories.
func entryJSONSize(id *Entry, labels, annotations []kv) int {
	n, fields := 2, 0 // {}
	for _, f := range [...]struct {
		name string
		v    string
	}{
		{jsonGroup, id.Group}, {jsonVersion, id.Version}, {jsonKind, id.Kind},
		{jsonNamespace, id.Namespace}, {jsonName, id.Name},
	} {
		if f.v != "" {
			n, fields = n+len(f.name)+len(f.v)+2, fields+1
		}
	}
	for _, m := range [...]struct {
		name  string
		pairs []kv
	}{{jsonLabels, labels}, {jsonAnnotations, annotations}} {
		if len(m.pairs) == 0 {
			continue
		}
		n, fields = n+len(m.name)+2+len(m.pairs)*6-1, fields+1 // {} and "":"" with commas
		for _, p := range m.pairs {
			n += len(p.k) + len(p.v)
		}
	}
	if fields > 1 {
		n += fields - 1
	}
	return n
}

// addChunk appends the entries of one chunk's data, validated as DecodeEntries validates them.
func (p *inventoryParts) addChunk(data []byte) error {
	first := len(p.entries)
	if !p.parseCanonical(data) {
		entries, err := DecodeEntries(data)
		if err != nil {
			return err
		}
		for i := range entries {
			p.add(&entries[i])
		}
		return nil
	}
	for i := first; i < len(p.entries); i++ {
		e := &p.entries[i]
		if err := e.validateRequired(); err != nil {
			return err
		}
		for _, a := range p.annotations(i) {
			if err := e.checkAnnotationKey(a.k); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseCanonical appends the entries of data when data is in the strict form this package
// writes: no whitespace, known fields in declaration order and non-empty, maps non-empty with
// strictly increasing keys, strings of printable ASCII that need no escaping. Such input
// decodes, with encoding/json too, to exactly those strings, so this skips reflection and
// maps. On anything else it returns false with p unchanged, and the caller uses DecodeEntries.
func (p *inventoryParts) parseCanonical(data []byte) bool {
	entries, pairs, bounds := len(p.entries), len(p.pairs), len(p.bounds)
	if bounds == 0 {
		p.bounds = append(p.bounds, 0)
	}
	// One copy of the chunk; every parsed string is a substring of it.
	c := scanner{s: string(data)}
	ok := c.byte('[')
	if ok && !c.byte(']') {
		for ok = p.parseEntry(&c); ok && c.byte(','); {
			ok = p.parseEntry(&c)
		}
		ok = ok && c.byte(']')
	}
	if !ok || c.i != len(c.s) {
		p.entries, p.pairs, p.bounds = p.entries[:entries], p.pairs[:pairs], p.bounds[:bounds]
		return false
	}
	return true
}

func (p *inventoryParts) parseEntry(c *scanner) bool {
	if !c.byte('{') {
		return false
	}
	var e Entry
	first := true
	for _, f := range [...]struct {
		name string
		v    *string
	}{
		{jsonGroup, &e.Group}, {jsonVersion, &e.Version}, {jsonKind, &e.Kind},
		{jsonNamespace, &e.Namespace}, {jsonName, &e.Name},
	} {
		if c.field(f.name, first) {
			v, ok := c.plainString()
			if !ok || v == "" {
				return false
			}
			*f.v, first = v, false
		}
	}
	for _, name := range [...]string{jsonLabels, jsonAnnotations} {
		if c.field(name, first) {
			if !p.parseObject(c) {
				return false
			}
			first = false
		}
		p.bounds = append(p.bounds, len(p.pairs))
	}
	if first || !c.byte('}') {
		return false
	}
	p.entries = append(p.entries, e)
	return true
}

// parseObject appends the pairs of a non-empty object whose keys strictly increase, so that
// they are already sorted and none repeats.
func (p *inventoryParts) parseObject(c *scanner) bool {
	if !c.byte('{') {
		return false
	}
	for i := 0; ; i++ {
		if i > 0 && c.byte('}') {
			return true
		}
		if i > 0 && !c.byte(',') {
			return false
		}
		k, ok := c.plainString()
		if !ok || (i > 0 && k <= p.pairs[len(p.pairs)-1].k) || !c.byte(':') {
			return false
		}
		v, ok := c.plainString()
		if !ok {
			return false
		}
		p.pairs = append(p.pairs, kv{k, v})
	}
}

type scanner struct {
	s string
	i int
}

func (c *scanner) byte(b byte) bool {
	if c.i < len(c.s) && c.s[c.i] == b {
		c.i++
		return true
	}
	return false
}

// field consumes `,"name":` (or `"name":` for the first field) when it comes next.
func (c *scanner) field(name string, first bool) bool {
	rest := c.s[c.i:]
	if !first {
		if len(rest) == 0 || rest[0] != ',' {
			return false
		}
		rest = rest[1:]
	}
	if !strings.HasPrefix(rest, name) {
		return false
	}
	c.i = len(c.s) - len(rest) + len(name)
	return true
}

// plainString consumes a string made only of bytes json.Marshal writes unescaped.
func (c *scanner) plainString() (string, bool) {
	if !c.byte('"') {
		return "", false
	}
	for start := c.i; c.i < len(c.s); c.i++ {
		if b := c.s[c.i]; b == '"' {
			c.i++
			return c.s[start : c.i-1], true
		} else if !jsonPlain[b] {
			return "", false
		}
	}
	return "", false
}
