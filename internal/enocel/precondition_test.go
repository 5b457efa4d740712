package enocel_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/enocel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	uid    = "6b7d0c1e-4b6a-4f1e-9d1c-0a1b2c3d4e5f"
	digest = "0123456789abcdef"
)

var written = time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)

// tombstone is the self-checking tombstone of one recorded ConfigMap, as a hand-off publishes
// it, and the hand-off's digest.
func tombstone(t *testing.T) (*unstructured.Unstructured, string) {
	t.Helper()
	plan := domain.RecoveryPlan{
		Decision: domain.Decision{SynthesisUUID: "11111111-2222-3333-4444-555555555555", Outcome: domain.OutcomeRecovered, Tombstones: 1},
		Tombstones: []domain.Tombstone{{UID: uid, Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a",
			Annotations: map[string]string{domain.AnnotationOverrides: `[{"path":"self.metadata.annotations['eno.azure.io/disable-reconciliation']","value":"false"}]`}}}},
		HistoryWritten: written,
	}
	h, err := domain.NewHandoff(plan)
	require.NoError(t, err)
	require.Len(t, h.Resources, 1)
	m := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal([]byte(h.Resources[0].Manifest), &m.Object))
	return m, h.Digest
}

func armedComposition(d string) *unstructured.Unstructured {
	c := &unstructured.Unstructured{Object: map[string]any{}}
	c.SetName("web")
	c.SetNamespace("team-a")
	c.SetAnnotations(map[string]string{domain.AnnotationArmed: d})
	return c
}

func live(mf ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetAPIVersion("v1")
	o.SetKind("ConfigMap")
	o.SetName("a")
	o.SetNamespace("ns")
	o.SetUID(uid)
	o.SetManagedFields(mf)
	return o
}

func write(manager string, at time.Time, subresource string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Time: &metav1.Time{Time: at}, Subresource: subresource}
}

// Every part of a tombstone's precondition, evaluated by Eno's CEL environment against a live
// object and the Composition as Eno hands them to a condition: the tombstone acts only when all
// hold, and a missing field or a failed evaluation keeps the object (design §6.2).
func TestPreconditionOnEnosLiveRead(t *testing.T) {
	before, after := written.Add(-time.Hour), written.Add(time.Second)
	for name, tt := range map[string]struct {
		live   func() *unstructured.Unstructured
		comp   func(d string) *unstructured.Unstructured
		enable bool
		// decided: the condition evaluates to false, rather than failing to evaluate.
		decided bool
	}{
		"as recovery saw it": {live: func() *unstructured.Unstructured { return live(write("eno", before, "")) }, enable: true},
		"written the same second": {live: func() *unstructured.Unstructured {
			return live(write("eno", written.Add(900*time.Millisecond), ""))
		}, enable: true},
		"a newer status write": {live: func() *unstructured.Unstructured {
			return live(write("eno", before, ""), write("kubelet", after, "status"))
		}, enable: true},
		"re-created (another UID)": {live: func() *unstructured.Unstructured {
			o := live(write("eno", before, ""))
			o.SetUID("7b7d0c1e-4b6a-4f1e-9d1c-0a1b2c3d4e5f")
			return o
		}},
		"Eno wrote it after the history (another composition took it over)": {live: func() *unstructured.Unstructured {
			return live(write("eno", after, ""))
		}, decided: true},
		"written after the history": {live: func() *unstructured.Unstructured {
			return live(write("eno", before, ""), write("kubectl", after, ""))
		}},
		"bare: no managedFields, no field to own": {live: func() *unstructured.Unstructured { return live() }, enable: true},
		"bare: an empty managedFields list": {live: func() *unstructured.Unstructured {
			o := live()
			require.NoError(t, unstructured.SetNestedSlice(o.Object, []any{}, "metadata", "managedFields"))
			return o
		}, enable: true},
		"bare ClusterRole without rules": {live: func() *unstructured.Unstructured {
			o := live()
			o.SetAPIVersion("rbac.authorization.k8s.io/v1")
			o.SetKind("ClusterRole")
			o.Object["rules"] = nil
			return o
		}, enable: true},
		"bare Namespace: the server's own label and spec": {live: func() *unstructured.Unstructured {
			o := live()
			o.SetLabels(map[string]string{"kubernetes.io/metadata.name": "a"})
			o.Object["spec"] = map[string]any{"finalizers": []any{"kubernetes"}}
			return o
		}, enable: true},
		"another spec": {live: func() *unstructured.Unstructured {
			o := live()
			o.Object["spec"] = map[string]any{"finalizers": []any{"kubernetes", "x"}}
			return o
		}},
		"bare but for a status entry": {live: func() *unstructured.Unstructured {
			o := live(write("kubelet", before, "status"))
			o.Object["status"] = map[string]any{"phase": "Active"}
			return o
		}, enable: true},
		"content but no managedFields (stripped)": {live: func() *unstructured.Unstructured {
			o := live()
			o.Object["data"] = map[string]any{"k": "v"}
			return o
		}},
		"a label but no managedFields": {live: func() *unstructured.Unstructured {
			o := live()
			o.SetLabels(map[string]string{"app": "x"})
			return o
		}},
		"content and only a status entry": {live: func() *unstructured.Unstructured {
			o := live(write("kubelet", before, "status"))
			o.Object["data"] = map[string]any{"k": "v"}
			return o
		}},
		"co-managed before the history (Flux-style)": {live: func() *unstructured.Unstructured {
			return live(write("eno", before, ""), write("kustomize-controller", before, ""))
		}, decided: true},
		"identical takeover: another manager, no time": {live: func() *unstructured.Unstructured {
			return live(write("eno", before, ""), metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply})
		}, decided: true},
		"Eno's update as eno-reconciler": {live: func() *unstructured.Unstructured {
			return live(write("eno", before, ""), write("eno-reconciler", before, ""))
		}, enable: true},
		"absent": {live: func() *unstructured.Unstructured { return nil }},
		"entry with no time": {live: func() *unstructured.Unstructured {
			return live(metav1.ManagedFieldsEntry{Manager: "eno", Operation: metav1.ManagedFieldsOperationApply})
		}, decided: true},
		"composition paused": {comp: func(d string) *unstructured.Unstructured {
			c := armedComposition(d)
			c.SetAnnotations(map[string]string{domain.AnnotationArmed: d, domain.AnnotationDisableReconciliation: "true"})
			return c
		}},
		"composition deleting": {comp: func(d string) *unstructured.Unstructured {
			c := armedComposition(d)
			c.SetDeletionTimestamp(&metav1.Time{Time: after})
			return c
		}},
		"disarmed":          {comp: func(string) *unstructured.Unstructured { return armedComposition("") }},
		"armed for another": {comp: func(string) *unstructured.Unstructured { return armedComposition("fedcba9876543210") }},
		"composition without annotations": {comp: func(string) *unstructured.Unstructured {
			c := armedComposition("")
			c.SetAnnotations(nil)
			return c
		}},
	} {
		t.Run(name, func(t *testing.T) {
			m, d := tombstone(t)
			l := live(write("eno", before, ""))
			if tt.live != nil {
				l = tt.live()
			}
			c := armedComposition(d)
			if tt.comp != nil {
				c = tt.comp(d)
			}
			snap, outcomes := enomodel.ApplyOverrides(m, l, c)
			require.Len(t, outcomes, 2)
			want := "true"
			if tt.enable {
				want = "false"
				assert.Equal(t, enomodel.OverrideActive, outcomes[1])
			} else {
				assert.NotEqual(t, enomodel.OverrideActive, outcomes[1])
			}
			if tt.decided {
				assert.Equal(t, enomodel.OverrideInactive, outcomes[1], "unknown on purpose, not by an evaluation error")
			}
			assert.Equal(t, want, snap.GetAnnotations()[domain.AnnotationDisableReconciliation])
		})
	}
}

// Should an Eno whose CEL environment differs fail to compile the condition, its decoding stops
// at the first override, which it then applies unconditionally: the tombstone stays disabled.
func TestPreconditionThatDoesNotCompileKeepsTheObject(t *testing.T) {
	m, d := tombstone(t)
	raw := m.GetAnnotations()[domain.AnnotationOverrides]
	cond, err := domain.Precondition(uid, domain.EnoManagers{}, written, d)
	require.NoError(t, err)
	quoted, err := json.Marshal(cond)
	require.NoError(t, err)
	broken := strings.ReplaceAll(raw, string(quoted[1:len(quoted)-1]), `self.metadata.uid ==`)
	require.NotEqual(t, raw, broken)
	annotations := m.GetAnnotations()
	annotations[domain.AnnotationOverrides] = broken
	m.SetAnnotations(annotations)
	snap, outcomes := enomodel.ApplyOverrides(m, live(write("eno", written.Add(-time.Hour), "")), armedComposition(d))
	assert.Equal(t, []enomodel.OverrideOutcome{enomodel.OverrideActive}, outcomes, "decoding stopped at the first, applied without a condition")
	assert.Equal(t, "true", snap.GetAnnotations()[domain.AnnotationDisableReconciliation])
}

// The condition compiles in Eno's environment: Eno applies an override whose condition does
// not compile unconditionally.
func TestPreconditionCompiles(t *testing.T) {
	cond, err := domain.Precondition(uid, domain.EnoManagers{}, written, digest)
	require.NoError(t, err)
	_, err = enocel.Compile(cond)
	require.NoError(t, err)
	for _, bad := range []string{`a" || true || "`, "", "x\ny"} {
		_, err := domain.Precondition(bad, domain.EnoManagers{}, written, digest)
		assert.Error(t, err, "%q", bad)
		_, err = domain.Precondition(uid, domain.EnoManagers{}, written, bad)
		assert.Error(t, err, "%q", bad)
	}
}
