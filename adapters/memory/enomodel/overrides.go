package enomodel

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/internal/enocel"
)

// The decoding and application of eno.azure.io/overrides, as Eno v0.2.17 does it, with
// conditions compiled and evaluated in Eno's CEL environment (internal/enocel): what the models
// of Eno (Eno here, and the simulation's) apply before they act on a resource.

// override is one entry of eno.azure.io/overrides as Eno reads it.
type override struct {
	Path            string `json:"path"`
	Condition       string `json:"condition"`
	Value           any    `json:"value"`
	ValueExpression string `json:"valueExpression"`
}

// OverrideOutcome is what applying one override did, named as Eno's mutation statuses are.
type OverrideOutcome string

const (
	OverrideActive           OverrideOutcome = "Active"
	OverrideInactive         OverrideOutcome = "Inactive"
	OverrideInvalidCondition OverrideOutcome = "InvalidCondition"
	OverrideUnsupported      OverrideOutcome = "Unsupported"
	// OverridePanics: an element decoded without a path; Eno's Op.Apply dereferences it and
	// the reconcile panics, so the resource is never acted on.
	OverridePanics OverrideOutcome = "Panics"
)

// ApplyOverrides applies the manifest's eno.azure.io/overrides to a copy of it, each condition
// evaluated against the live object (nil when absent: `self` is then an empty map) and the
// Composition, as Eno's Resource.SnapshotWithOverrides does. A condition that fails to
// evaluate, or is not true, applies nothing.
//
// Decoding follows encoding/json into Eno's []*mutation.Op: invalid JSON decodes nothing, but an
// element whose UnmarshalJSON fails stops the decoding with that element kept as far as it got.
// Op.UnmarshalJSON sets the value, then parses the path, then compiles the condition: an
// element whose condition does not compile is kept with no condition, so Eno applies it
// unconditionally; one whose path does not parse has no path and applies nothing.
func ApplyOverrides(manifest, live, comp *unstructured.Unstructured) (*unstructured.Unstructured, []OverrideOutcome) {
	out := manifest.DeepCopy()
	raw, ok := manifest.GetAnnotations()["eno.azure.io/overrides"]
	if !ok {
		return out, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &elems); err != nil {
		return out, []OverrideOutcome{OverrideInvalidCondition}
	}
	self := map[string]any{}
	if live != nil {
		self = live.Object
	}
	var outcomes []OverrideOutcome
	for _, e := range elems {
		var op override
		if err := json.Unmarshal(e, &op); err != nil || (op.Value != nil && op.ValueExpression != "") {
			outcomes = append(outcomes, OverridePanics)
			break
		}
		if !strings.HasPrefix(strings.TrimSpace(op.Path), "self") {
			outcomes = append(outcomes, OverridePanics) // Eno refuses the path: no path, then a panic
			break
		}
		path, err := parsePath(op.Path)
		if err != nil {
			outcomes = append(outcomes, OverrideUnsupported) // valid for Eno, beyond this model
			break
		}
		var prg cel.Program
		compiled := true
		if op.Condition != "" {
			if prg, err = enocel.Compile(op.Condition); err != nil {
				compiled = false // kept with no condition: applied unconditionally
			}
		}
		outcomes = append(outcomes, applyOne(op, path, prg, out, self, comp))
		if !compiled {
			break
		}
	}
	return out, outcomes
}

func applyOne(op override, path []string, prg cel.Program, out *unstructured.Unstructured, self map[string]any, comp *unstructured.Unstructured) OverrideOutcome {
	if prg != nil {
		// pathManagedByEno: the model does not track which fields Eno's field manager owns.
		val, _, err := prg.Eval(map[string]any{"self": self, "composition": compositionVar(comp), "pathManagedByEno": false})
		if err != nil {
			return OverrideInvalidCondition
		}
		if b, ok := val.Value().(bool); !ok || !b {
			return OverrideInactive
		}
	}
	if op.ValueExpression != "" {
		return OverrideUnsupported // no tombstone of this project uses one
	}
	if !setPath(out.Object, path, op.Value) {
		return OverrideUnsupported
	}
	return OverrideActive
}

var pathSection = regexp.MustCompile(`^(?:\.?([a-zA-Z_][a-zA-Z0-9_]*)|\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\[\s*'((?:[^'\\]|\\.)*)'\s*\])`)

// parsePath reads the part of Eno's path language that names object fields: `self`, then
// `.field`, `["key"]` or `['key']` sections. Indexes, wildcards and matchers are refused.
func parsePath(expr string) ([]string, error) {
	rest := strings.TrimSpace(expr)
	var fields []string
	for rest != "" {
		m := pathSection.FindStringSubmatch(rest)
		if m == nil {
			return nil, fmt.Errorf("path %q: unsupported section at %q", expr, rest)
		}
		switch {
		case m[1] != "":
			fields = append(fields, m[1])
		case m[2] != "" || strings.HasPrefix(m[0], `[`) && strings.Contains(m[0], `"`):
			fields = append(fields, strings.ReplaceAll(m[2], `\"`, `"`))
		default:
			fields = append(fields, strings.ReplaceAll(m[3], `\'`, `'`))
		}
		rest = strings.TrimSpace(rest[len(m[0]):])
	}
	if len(fields) < 2 || fields[0] != "self" {
		return nil, fmt.Errorf("path %q: paths start with self", expr)
	}
	return fields[1:], nil
}

// setPath assigns value at path, creating missing maps; false when a parent is not a map.
func setPath(obj map[string]any, path []string, value any) bool {
	cur := obj
	for _, f := range path[:len(path)-1] {
		next, ok := cur[f]
		if !ok || next == nil {
			m := map[string]any{}
			cur[f] = m
			cur = m
			continue
		}
		m, ok := next.(map[string]any)
		if !ok {
			return false
		}
		cur = m
	}
	cur[path[len(path)-1]] = value
	return true
}

// compositionVar is what Eno hands a condition as `composition`: name, namespace, labels,
// annotations and deletionTimestamp (RFC 3339, or null), under metadata.
func compositionVar(comp *unstructured.Unstructured) map[string]any {
	m := map[string]any{
		"name":        comp.GetName(),
		"namespace":   comp.GetNamespace(),
		"labels":      comp.GetLabels(),
		"annotations": comp.GetAnnotations(),
	}
	if ts := comp.GetDeletionTimestamp(); ts != nil {
		m["deletionTimestamp"] = ts.Time.UTC().Format(time.RFC3339)
	} else {
		m["deletionTimestamp"] = nil
	}
	return map[string]any{"metadata": m}
}
