package enocel

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// ResourceFilters compiles each eno-reconciler's --resource-filter as Eno's cel.Parse does: a
// tombstone is loaded when one of them is true on it, evaluated as Eno v0.2.17's Cache.Fill does
// (`self` the manifest, which the hand-off writes without the status and creationTimestamp Eno
// drops; `composition` its metadata; `pathManagedByEno` unbound, an error). An error or a value
// that is not true loads nothing. An empty expression is a reconciler without the flag, which
// loads everything: the filter is then nil, as for no expression at all.
func ResourceFilters(exprs []string) (domain.ResourceFilter, error) {
	prgs := make([]cel.Program, len(exprs))
	for i, e := range exprs {
		if e == "" {
			return nil, nil
		}
		var err error
		if prgs[i], err = Compile(e); err != nil {
			return nil, fmt.Errorf("resource filter %q: %w", e, err)
		}
	}
	if len(prgs) == 0 {
		return nil, nil
	}
	return func(manifest string, comp domain.Composition) error {
		var self map[string]any
		if err := json.Unmarshal([]byte(manifest), &self); err != nil {
			return err
		}
		// Recovery never runs for a deleting Composition: deletionTimestamp is null.
		vars := map[string]any{"self": self, "composition": map[string]any{"metadata": map[string]any{
			"name": comp.Name, "namespace": comp.Namespace, "labels": comp.Labels, "annotations": comp.Annotations, "deletionTimestamp": nil}}}
		whys := make([]string, len(prgs))
		for i, prg := range prgs {
			val, _, err := prg.Eval(vars)
			if err == nil {
				if b, ok := val.Value().(bool); ok && b {
					return nil
				}
				err = fmt.Errorf("gives %v", val.Value())
			}
			whys[i] = fmt.Sprintf("%q: %v", exprs[i], err)
		}
		return fmt.Errorf("no --resource-filter of the eno-reconcilers in use loads it (%s): Eno would carry its tombstone for ever", strings.Join(whys, "; "))
	}, nil
}
