package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

func TestMergeKeysFoldsRepeatedKeys(t *testing.T) {
	for _, tc := range []struct {
		name     string
		base, kv []any
		want     []any
	}{
		{"nothing new", []any{"a", 1}, nil, []any{"a", 1}},
		{"distinct keys", []any{"a", 1}, []any{"b", 2}, []any{"a", 1, "b", 2}},
		{"the last value wins in place", []any{"a", 1, "b", 2}, []any{"a", 3}, []any{"a", 3, "b", 2}},
		{"repeats within one call", nil, []any{"a", 1, "a", 2}, []any{"a", 2}},
		{"a dangling key keeps pairs aligned", []any{"a"}, []any{"b", 2}, []any{"a", "(MISSING)", "b", 2}},
		{"non-string keys are kept", []any{1, "x"}, []any{1, "y"}, []any{1, "x", 1, "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, mergeKeys(tc.base, tc.kv))
		})
	}
}

func TestJSONLogsCarryEachKeyOnce(t *testing.T) {
	var buf bytes.Buffer
	log, flush, err := (&logOptions{format: "json"}).build(&buf)
	require.NoError(t, err)
	// As Controller, Reconcile and a use case each add the Composition.
	l := log.WithValues("composition", "ns/a").WithValues("composition", "ns/a", "lineage", "x")
	l.Info("recovery decided", "composition", "ns/a", "outcome", "NoInventory")
	l.Error(errors.New("boom"), "reconcile failed", "composition", "ns/a")
	l.V(1).Info("not at this verbosity")
	flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	for _, line := range lines {
		assert.Equal(t, 1, strings.Count(line, `"composition":`), line)
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj), line)
		assert.Equal(t, "ns/a", obj["composition"])
		assert.Equal(t, "x", obj["lineage"])
	}
}

// client-go logs through klog; run routes it to the JSON logger, so that stderr holds JSON
// lines only (test/e2e checks every line of every run).
func TestClientGoLogsAreJSON(t *testing.T) {
	var buf bytes.Buffer
	log, flush, err := (&logOptions{format: "json"}).build(&buf)
	require.NoError(t, err)
	routeClientGoLogs(log)
	defer klog.ClearLogger()
	klog.Warning("watch of *v1.Secret ended with: an error on the server")
	klog.InfoS("Waited before sending request", "delay", "1.2s")
	klog.ErrorS(errors.New("boom"), "Failed to update lock")
	flush()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String())
	for _, line := range lines {
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &obj), line)
		assert.Equal(t, "client-go", obj["logger"], line)
	}
	assert.Contains(t, lines[0], "watch of *v1.Secret ended")
	assert.Contains(t, lines[2], `"error":"boom"`)
}
