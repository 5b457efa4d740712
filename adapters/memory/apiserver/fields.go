package apiserver

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"time"
)

// This file keeps metadata.managedFields as kube-apiserver's field manager does for Update
// operations (structured-merge-diff's Updater behind managedFieldsUpdater):
//   - the fields a write adds or changes become its manager's, and every other entry loses them;
//   - the fields it removes leave every entry; an entry left with no field is dropped;
//   - the manager's entry (manager, Update, apiVersion, subresource) is created, and its time
//     set to the clock, only if the write added or changed a field: a write that only removes
//     fields neither creates the entry nor moves its time;
//   - a no-op writes nothing at all (update checks it after this);
//   - an update of an object without managedFields (or one that resets them with [] or [{}])
//     leaves it without: the field manager skips objects it does not track.
// Fields are named as in FieldsV1: maps by key (f:), metadata.finalizers by value (v:),
// metadata.ownerReferences by uid (k:, each reference atomic); other lists are atomic, as for a
// CRD schema that preserves unknown fields.

// fieldSet holds paths, each the FieldsV1 keys from the root joined by pathSep.
type fieldSet map[string]bool

const pathSep = "\x00"

type managedEntry struct {
	manager, operation, apiVersion, subresource, time string
	fields                                            fieldSet
}

// trackFields sets obj's managedFields for a write by c.manager that turns live (nil on create)
// into obj. raw is the object as the request sent it, for the managedFields it carried: none
// means the live ones, [] or [{}] means start afresh, others replace them (not on a subresource).
func (s *Server) trackFields(c call, live, raw, obj object) {
	entries := decodeManaged(live)
	if reqMF, sent := raw.meta()["managedFields"].([]any); sent && c.sub == "" {
		switch {
		case len(reqMF) == 0 || (len(reqMF) == 1 && reflect.DeepEqual(reqMF[0], map[string]any{})):
			entries = nil
		case len(decodeManaged(raw)) > 0:
			entries = decodeManaged(raw)
		}
	}
	if live != nil && len(entries) == 0 {
		encodeManaged(obj, nil) // an update of an object without managedFields tracks none
		return
	}
	changed, removed := diffFields(c, live, obj)
	kept := entries[:0]
	for _, e := range entries {
		for p := range e.fields {
			if changed[p] || removed[p] {
				delete(e.fields, p)
			}
		}
		if len(e.fields) > 0 {
			kept = append(kept, e)
		}
	}
	entries = kept
	if len(changed) > 0 {
		i := findEntry(entries, c)
		if i < 0 {
			entries = append(entries, managedEntry{manager: c.manager, operation: "Update", apiVersion: c.res.apiVersion(), subresource: c.sub, fields: fieldSet{}})
			i = len(entries) - 1
		}
		for p := range changed {
			entries[i].fields[p] = true
		}
		entries[i].time = s.timestamp()
	}
	encodeManaged(obj, entries)
}

func findEntry(entries []managedEntry, c call) int {
	for i, e := range entries {
		if e.manager == c.manager && e.operation == "Update" && e.apiVersion == c.res.apiVersion() && e.subresource == c.sub {
			return i
		}
	}
	return -1
}

// diffFields lists the fields a write adds or changes and those it removes, leaving out what the
// field manager strips (identity and system metadata) and what the strategy resets (status on
// the main resource, everything but status on the status subresource).
func diffFields(c call, before, after object) (changed, removed fieldSet) {
	changed, removed = fieldSet{}, fieldSet{}
	tracked := func(path []string) bool {
		switch {
		case len(path) == 1 && (path[0] == "f:apiVersion" || path[0] == "f:kind"):
			return false
		case len(path) == 1 && c.sub == "status":
			return path[0] == "f:status"
		case len(path) == 1 && c.res.Status:
			return path[0] != "f:status"
		case len(path) == 2 && path[0] == "f:metadata":
			switch path[1] {
			case "f:name", "f:namespace", "f:creationTimestamp", "f:selfLink", "f:uid", "f:generation", "f:managedFields", "f:resourceVersion":
				return false
			}
		}
		return true
	}
	var addAll func(set fieldSet, path []string, v any, self bool)
	addAll = func(set fieldSet, path []string, v any, self bool) {
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			return // an empty map or struct holds no field
		}
		if self && len(path) > 0 && !(len(path) == 1 && path[0] == "f:metadata") {
			set[strings.Join(path, pathSep)] = true
		}
		for k, child := range children(path, v) {
			if p := append(slicesClone(path), k); tracked(p) {
				addAll(set, p, child, true)
			}
		}
	}
	var visit func(path []string, a, b any, inA, inB bool)
	visit = func(path []string, a, b any, inA, inB bool) {
		ac, bc := children(path, a), children(path, b)
		if inA && inB && ac != nil && bc != nil {
			for k := range union(ac, bc) {
				if p := append(slicesClone(path), k); tracked(p) {
					av, okA := ac[k]
					bv, okB := bc[k]
					visit(p, av, bv, okA, okB)
				}
			}
			return
		}
		if inA && inB && reflect.DeepEqual(a, b) {
			return
		}
		if inA {
			addAll(removed, path, a, !inB)
		}
		if inB {
			addAll(changed, path, b, true)
		}
	}
	var a any
	if before != nil {
		a = map[string]any(before)
	}
	visit(nil, a, map[string]any(after), before != nil, true)
	return changed, removed
}

// children are the members of a map or of a set-like list, by FieldsV1 key; nil for a leaf.
func children(path []string, v any) map[string]any {
	if len(path) == 3 && path[0] == "f:metadata" && path[1] == "f:ownerReferences" {
		return nil // an OwnerReference is a structType=atomic: its key alone is tracked
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, child := range v {
			if child != nil { // a null is no field
				out["f:"+k] = child
			}
		}
		return out
	case []any:
		if len(path) != 2 || path[0] != "f:metadata" || (path[1] != "f:finalizers" && path[1] != "f:ownerReferences") {
			return nil // atomic
		}
		out := make(map[string]any, len(v))
		for _, item := range v {
			if path[1] == "f:finalizers" {
				b, _ := json.Marshal(item)
				out["v:"+string(b)] = item
			} else {
				uid, _ := item.(map[string]any)["uid"].(string)
				b, _ := json.Marshal(map[string]string{"uid": uid})
				out["k:"+string(b)] = item
			}
		}
		return out
	}
	return nil
}

func union(a, b map[string]any) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func slicesClone(p []string) []string { return append([]string(nil), p...) }

func decodeManaged(o object) []managedEntry {
	if o == nil {
		return nil
	}
	list, _ := o.meta()["managedFields"].([]any)
	var out []managedEntry
	for _, item := range list {
		m, _ := item.(map[string]any)
		str := func(k string) string { s, _ := m[k].(string); return s }
		e := managedEntry{manager: str("manager"), operation: str("operation"), apiVersion: str("apiVersion"),
			subresource: str("subresource"), time: str("time"), fields: fieldSet{}}
		if tree, ok := m["fieldsV1"].(map[string]any); ok {
			flatten(nil, tree, e.fields)
		}
		if e.manager != "" || len(e.fields) > 0 {
			out = append(out, e)
		}
	}
	return out
}

func flatten(prefix []string, tree map[string]any, set fieldSet) {
	for k, v := range tree {
		if k == "." {
			set[strings.Join(prefix, pathSep)] = true
			continue
		}
		p := append(slicesClone(prefix), k)
		if sub, _ := v.(map[string]any); len(sub) > 0 {
			flatten(p, sub, set)
		} else {
			set[strings.Join(p, pathSep)] = true
		}
	}
}

// encodeManaged writes the entries in the real server's order: operation, time (seconds),
// manager, apiVersion, subresource.
func encodeManaged(obj object, entries []managedEntry) {
	if len(entries) == 0 {
		delete(obj.meta(), "managedFields")
		return
	}
	sort.SliceStable(entries, func(i, j int) bool {
		p, q := entries[i], entries[j]
		if p.operation != q.operation {
			return p.operation < q.operation
		}
		if pt, qt := unixSeconds(p.time), unixSeconds(q.time); pt != qt {
			return pt < qt
		}
		if p.manager != q.manager {
			return p.manager < q.manager
		}
		if p.apiVersion != q.apiVersion {
			return p.apiVersion < q.apiVersion
		}
		return p.subresource < q.subresource
	})
	list := make([]any, 0, len(entries))
	for _, e := range entries {
		m := map[string]any{"manager": e.manager, "operation": e.operation, "apiVersion": e.apiVersion,
			"fieldsType": "FieldsV1", "fieldsV1": tree(e.fields)}
		if e.time != "" {
			m["time"] = e.time
		}
		if e.subresource != "" {
			m["subresource"] = e.subresource
		}
		list = append(list, m)
	}
	obj.meta()["managedFields"] = list
}

func unixSeconds(t string) int64 {
	parsed, err := time.Parse(time.RFC3339, t)
	if err != nil {
		return 0
	}
	return parsed.Unix()
}

// tree is the FieldsV1 form of a set: nested keys, "." marking a member that has members below.
func tree(set fieldSet) map[string]any {
	root := map[string]any{}
	node := func(path string) map[string]any {
		n := root
		for _, k := range strings.Split(path, pathSep) {
			child, ok := n[k].(map[string]any)
			if !ok {
				child = map[string]any{}
				n[k] = child
			}
			n = child
		}
		return n
	}
	for p := range set {
		node(p)
	}
	for p := range set {
		if n := node(p); len(n) > 0 {
			n["."] = map[string]any{}
		}
	}
	return root
}
