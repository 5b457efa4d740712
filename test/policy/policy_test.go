package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

const (
	inventoryNamespace = domain.DefaultInventoryNamespace
	// policyEffect bounds how long the API server takes to load new policies and bindings.
	policyEffect = 2 * time.Minute
)

// The policies' messages (deploy/), which each denial must carry.
const (
	msgSecretType      = "may only write Secrets of type eno.azure.io/inventory-snapshot"
	msgSecretOld       = "may only update its own inventory Secrets"
	msgSpec            = "may not change a Composition's spec"
	msgLabels          = "may not change a Composition's labels"
	msgOwnerReferences = "may not change a Composition's ownerReferences"
	msgFinalizers      = "may not change a Composition's finalizers"
	msgAnnotations     = "may change only the recovery decision, arming and force-resynthesis annotations"
	msgStatusOther     = "may change only status.currentSynthesis.resourceSlices"
	msgAppendOnly      = "may only append to status.currentSynthesis.resourceSlices"
	msgFamily          = "may only append slices of the synthesis's recovery family"
	msgTombstones      = "whose every resource is a tombstone"
	msgSliceOwner      = "controlled by a Composition"
	msgOurSlice        = "may only write recovery slices"
	msgSelfCheckForm   = "may only write tombstones that check themselves: disable-reconciliation"
	msgSelfCheckPins   = "may only write tombstones that check themselves: a condition that pins"
	msgDisarmed        = "may not change an arming annotation that says disarmed"
)

// fixture is one namespace with a Composition whose synthesis names one slice Eno wrote, and an
// empty Composition (a synthesis without resourceSlices), both created by the admin.
type fixture struct {
	ns         string
	comp       *unstructured.Unstructured
	empty      *unstructured.Unstructured
	synthesis  string
	admin      kubetest.Clients
	controller kubetest.Clients
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := kubetest.Context(t, time.Minute)
	f := fixture{admin: env.AdminClients(t), controller: kubetest.NewClients(t, controllerConfig()), synthesis: string(uuid.NewUUID())}
	f.ns = f.admin.NewNamespace(t, "policy")
	f.comp = createComposition(t, ctx, f.admin.Dynamic, f.ns, "web", f.synthesis, "web-enoslice-0")
	f.empty = createComposition(t, ctx, f.admin.Dynamic, f.ns, "empty", string(uuid.NewUUID()))
	// An operator's brake: a Composition whose hand-off was disarmed (design §6.2).
	createComposition(t, ctx, f.admin.Dynamic, f.ns, "disarmed", string(uuid.NewUUID()))
	_, err := f.admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(f.ns).Patch(ctx, "disarmed", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+domain.AnnotationArmed+`":"`+domain.ArmedOff+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = kubetest.CreateSlice(ctx, f.admin.Dynamic, domain.ResourceSlice{Namespace: f.ns, Name: "web-enoslice-0", SynthesisUUID: f.synthesis,
		Resources: []domain.SliceResource{{Manifest: configMap(f.ns, "kept")}}})
	require.NoError(t, err)
	return f
}

func configMap(ns, name string) string {
	return kubetest.Manifest("v1", "ConfigMap", ns, name, nil, nil, nil)
}

// createComposition creates a Composition with a current synthesis naming slices (none: no
// resourceSlices field at all, as Eno writes an empty synthesis).
func createComposition(t *testing.T, ctx context.Context, dyn dynamic.Interface, ns, name, synthesis string, slices ...string) *unstructured.Unstructured {
	t.Helper()
	syn := domain.Synthesis{UUID: synthesis, Synthesized: time.Now(), Ready: true, Slices: slices}
	u, err := kubetest.CreateComposition(ctx, dyn, domain.Composition{Namespace: ns, Name: name,
		Labels: map[string]string{"team": "web"}, Annotations: map[string]string{"owner": "web-team"}, Synthesis: &syn})
	require.NoError(t, err)
	return u
}

func (f fixture) compositions() dynamic.ResourceInterface {
	return f.controller.Dynamic.Resource(kubetest.CompositionResource).Namespace(f.ns)
}

func (f fixture) slices() dynamic.ResourceInterface {
	return f.controller.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(f.ns)
}

// recoverySlice is a recovery slice as the controller writes it: controlled by comp, of comp's
// sliceParts numbers the recovery slices the tests create.
var sliceParts int

// synthesis, holding tombstones.
func recoverySlice(comp *unstructured.Unstructured, synthesis string, resources ...map[string]any) *unstructured.Unstructured {
	items := make([]any, len(resources))
	for i, r := range resources {
		items[i] = r
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "ResourceSlice",
		"spec":       map[string]any{"synthesisUUID": synthesis, "resources": items},
	}}
	u.SetNamespace(comp.GetNamespace())
	sliceParts++ // a recovery slice is never written twice: each gets a name of its own
	u.SetName(domain.RecoverySliceName(comp.GetName(), synthesis, "0123456789abcdef", sliceParts))
	yes := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "eno.azure.io/v1", Kind: "Composition", Name: comp.GetName(), UID: comp.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	return u
}

// tombstone is a tombstone as the controller writes it: it checks itself (domain.NewHandoff).
func tombstone(ns, name string) map[string]any {
	return tombstones(domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name})[0]
}

// tombstones are the slice resources the controller writes for entries, each pinning a UID of
// its own.
func tombstones(entries ...domain.Entry) []map[string]any {
	ts := make([]domain.Tombstone, len(entries))
	for i, e := range entries {
		ts[i] = domain.Tombstone{Entry: e, UID: string(uuid.NewUUID())}
	}
	h, err := domain.NewHandoff(domain.RecoveryPlan{Decision: domain.Decision{Outcome: domain.OutcomeRecovered, SynthesisUUID: string(uuid.NewUUID())},
		Tombstones: ts, HistoryWritten: time.Now()})
	if err != nil {
		panic(err)
	}
	out := make([]map[string]any, len(h.Resources))
	for i, r := range h.Resources {
		out[i] = map[string]any{"manifest": r.Manifest, "deleted": true}
	}
	return out
}

func mergePatch(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// appendSlice is the hand-off's commit patch: test the synthesis, then append name to its
// resourceSlices (creating the list when the synthesis has none).
func appendSlice(t *testing.T, synthesis, name string, hasSlices bool) []byte {
	t.Helper()
	ops := []map[string]any{{"op": "test", "path": "/status/currentSynthesis/uuid", "value": synthesis}}
	if hasSlices {
		ops = append(ops, map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices/-", "value": map[string]any{"name": name}})
	} else {
		ops = append(ops, map[string]any{"op": "add", "path": "/status/currentSynthesis/resourceSlices", "value": []any{map[string]any{"name": name}}})
	}
	return mergePatch(t, ops)
}

func inventorySecret(name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: inventoryNamespace, Labels: map[string]string{domain.LabelManagedBy: domain.ManagedByValue}},
		Type:       domain.SecretType,
		Data:       map[string][]byte{domain.SecretDataKey: []byte("{}")},
	}
}

// requireDenied checks that err is the admission policy's denial carrying msg.
func requireDenied(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err, "the write was allowed")
	assert.Contains(t, err.Error(), "ValidatingAdmissionPolicy", "denied, but not by an admission policy")
	assert.Contains(t, err.Error(), msg)
}

// waitForPolicies polls until every policy of deploy/ denies a write of the controller (policies
// and bindings take effect asynchronously, RBAC too). The writes are dry runs, which run
// admission but store nothing.
func waitForPolicies(t *testing.T, f fixture) {
	t.Helper()
	ctx := kubetest.Context(t, policyEffect)
	dry := []string{metav1.DryRunAll}
	probes := map[string]func() error{
		msgSecretType: func() error {
			s := inventorySecret("policy-probe-" + f.ns)
			s.Type = corev1.SecretTypeOpaque
			_, err := f.controller.Kube.CoreV1().Secrets(inventoryNamespace).Create(ctx, s, metav1.CreateOptions{DryRun: dry})
			return err
		},
		msgSpec: func() error {
			_, err := f.compositions().Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"synthesizer":{"name":"other"}}}`), metav1.PatchOptions{DryRun: dry})
			return err
		},
		msgFamily: func() error {
			_, err := f.compositions().Patch(ctx, "web", types.JSONPatchType, appendSlice(t, f.synthesis, "probe", true), metav1.PatchOptions{DryRun: dry}, "status")
			return err
		},
		msgSelfCheckForm: func() error {
			s := recoverySlice(f.comp, f.synthesis, map[string]any{"manifest": configMap(f.ns, "probe"), "deleted": true})
			_, err := f.slices().Create(ctx, s, metav1.CreateOptions{DryRun: dry})
			return err
		},
		msgDisarmed: func() error {
			_, err := f.compositions().Patch(ctx, "disarmed", types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+domain.AnnotationArmed+`":"0123456789abcdef"}}}`), metav1.PatchOptions{DryRun: dry})
			return err
		},
		msgTombstones: func() error {
			s := recoverySlice(f.comp, f.synthesis, map[string]any{"manifest": configMap(f.ns, "probe")})
			_, err := f.slices().Create(ctx, s, metav1.CreateOptions{DryRun: dry})
			return err
		},
	}
	for msg, probe := range probes {
		kubetest.WaitFor(t, "a denial carrying "+msg, func(context.Context) error {
			if err := probe(); err == nil || !strings.Contains(err.Error(), msg) {
				return fmt.Errorf("not denied yet: %v", err)
			}
			return nil
		})
	}
}

// TestPoliciesAllowTheDesignsWrites makes every write the design makes, as the controller's
// ServiceAccount, with the policies in place.
func TestPoliciesAllowTheDesignsWrites(t *testing.T) {
	f := newFixture(t)
	waitForPolicies(t, f)
	ctx := kubetest.Context(t, time.Minute)

	t.Run("create and update of an inventory Secret", func(t *testing.T) {
		secrets := f.controller.Kube.CoreV1().Secrets(inventoryNamespace)
		created, err := secrets.Create(ctx, inventorySecret("web-"+f.ns+"-0"), metav1.CreateOptions{})
		require.NoError(t, err)
		created.Data[domain.SecretDataKey] = []byte(`{"rewritten":true}`)
		updated, err := secrets.Update(ctx, created, metav1.UpdateOptions{FieldManager: domain.FieldManager})
		require.NoError(t, err)
		// The mark of what a later synthesis disabled (design §4, disabled later): annotations only, under a
		// field manager of its own.
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[domain.AnnotationDisabledLater] = `{"snapshot":"s","ids":[]}`
		_, err = secrets.Update(ctx, updated, metav1.UpdateOptions{FieldManager: domain.MarkFieldManager})
		require.NoError(t, err)
	})
	t.Run("the decision annotation, by merge patch guarded by the resourceVersion", func(t *testing.T) {
		live, err := f.compositions().Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		patch := mergePatch(t, map[string]any{"metadata": map[string]any{"resourceVersion": live.GetResourceVersion(), "uid": live.GetUID(),
			"annotations": map[string]any{domain.AnnotationDecision: `{"outcome":"Recovered"}`}}})
		_, err = f.compositions().Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	})
	t.Run("the arming and force-resynthesis annotations, by merge patch", func(t *testing.T) {
		patch := mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
			domain.AnnotationArmed: "on", domain.AnnotationForceResynthesis: "true", domain.AnnotationDecision: nil}}})
		_, err := f.compositions().Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	})
	t.Run("the watch disarms a hand-off; the decision on a disarmed Composition", func(t *testing.T) {
		patch := mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{domain.AnnotationArmed: domain.ArmedOff}}})
		_, err := f.compositions().Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		patch = mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{domain.AnnotationDecision: `{"outcome":"Held"}`}}})
		_, err = f.compositions().Patch(ctx, "disarmed", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
	})
	t.Run("a recovery slice of Eno's full size, of tombstones with long names and many labels", func(t *testing.T) {
		// The policy's checks cost CEL work in proportion to the slice's bytes: a slice the
		// controller cuts at Eno's budget must stay within the API server's cost limit.
		entries := make([]domain.Entry, 150)
		for i := range entries {
			labels := map[string]string{}
			for l := range 16 {
				labels[fmt.Sprintf("example.com/%s-%02d", strings.Repeat("k", 60), l)] = strings.Repeat("v", 63)
			}
			entries[i] = domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: f.ns, Name: fmt.Sprintf("cm-%05d-%s", i, strings.Repeat("n", 231)),
				Labels: labels, Annotations: map[string]string{domain.AnnotationDeletionGroup: "2", "z.example.com/note": `a "quoted" <value> & more`}}
		}
		resources := tombstones(entries...)
		var bytes, n int
		for n < len(resources) && bytes+len(resources[n]["manifest"].(string)) <= domain.MaxSliceManifestBytes {
			bytes += len(resources[n]["manifest"].(string))
			n++
		}
		require.Less(t, n, len(resources), "the slice must be cut at Eno's budget")
		_, err := f.slices().Create(ctx, recoverySlice(f.comp, f.synthesis, resources[:n]...), metav1.CreateOptions{})
		require.NoError(t, err, "%d tombstones, %d bytes of manifests", n, bytes)
		t.Logf("%d tombstones, %d bytes of manifests", n, bytes)
	})
	t.Run("create of an all-tombstone recovery slice owned by its Composition", func(t *testing.T) {
		_, err := f.slices().Create(ctx, recoverySlice(f.comp, f.synthesis, tombstone(f.ns, "gone"), tombstone(f.ns, "gone-too")), metav1.CreateOptions{})
		require.NoError(t, err)
	})
	t.Run("the commit patch appends recovery slices", func(t *testing.T) {
		for _, name := range []string{domain.RecoverySliceName("web", f.synthesis, "0123456789abcdef", 0),
			domain.RecoverySliceName("web", f.synthesis, "0123456789abcdef", 1), domain.RecoverySliceName("web", f.synthesis, "fedcba9876543210", 0)} {
			_, err := f.compositions().Patch(ctx, "web", types.JSONPatchType, appendSlice(t, f.synthesis, name, true), metav1.PatchOptions{}, "status")
			require.NoError(t, err, name)
		}
		live, err := f.compositions().Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		slices, _, _ := unstructured.NestedSlice(live.Object, "status", "currentSynthesis", "resourceSlices")
		assert.Len(t, slices, 4)
	})
	t.Run("the commit patch on an empty synthesis, which has no resourceSlices", func(t *testing.T) {
		syn, _, _ := unstructured.NestedString(f.empty.Object, "status", "currentSynthesis", "uuid")
		_, found, _ := unstructured.NestedSlice(f.empty.Object, "status", "currentSynthesis", "resourceSlices")
		require.False(t, found, "the fixture's synthesis must have no resourceSlices field")
		_, err := f.compositions().Patch(ctx, "empty", types.JSONPatchType, appendSlice(t, syn, domain.RecoverySliceName("empty", syn, "0123456789abcdef", 0), false), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	})
}

// TestPoliciesDenyEverythingElse makes the writes the design never makes, as the controller's
// ServiceAccount: each is denied, by the policy with its message or by RBAC.
func TestPoliciesDenyEverythingElse(t *testing.T) {
	f := newFixture(t)
	waitForPolicies(t, f)
	ctx := kubetest.Context(t, time.Minute)
	adminSecrets := f.admin.Kube.CoreV1().Secrets(inventoryNamespace)
	secrets := f.controller.Kube.CoreV1().Secrets(inventoryNamespace)

	t.Run("updating a foreign kube-system Secret (a bootstrap token)", func(t *testing.T) {
		token := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + f.ns[len(f.ns)-5:] + "x", Namespace: inventoryNamespace},
			Type:       corev1.SecretTypeBootstrapToken,
			Data:       map[string][]byte{"token-id": []byte("abcdef"), "token-secret": []byte("0123456789abcdef")},
		}
		_, err := adminSecrets.Create(ctx, token, metav1.CreateOptions{})
		require.NoError(t, err)
		live, err := secrets.Get(ctx, token.Name, metav1.GetOptions{})
		require.NoError(t, err)
		live.Data["token-secret"] = []byte("fedcba9876543210")
		_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
		requireDenied(t, err, msgSecretType)
	})
	t.Run("relabelling a foreign Secret as ours", func(t *testing.T) {
		// Of our type but without our label: the old object is what the policy refuses.
		foreign := inventorySecret("foreign-" + f.ns)
		foreign.Labels = nil
		_, err := adminSecrets.Create(ctx, foreign, metav1.CreateOptions{})
		require.NoError(t, err)
		live, err := secrets.Get(ctx, foreign.Name, metav1.GetOptions{})
		require.NoError(t, err)
		live.Labels = map[string]string{domain.LabelManagedBy: domain.ManagedByValue}
		_, err = secrets.Update(ctx, live, metav1.UpdateOptions{})
		requireDenied(t, err, msgSecretOld)
	})
	t.Run("removing our label from an inventory Secret", func(t *testing.T) {
		created, err := secrets.Create(ctx, inventorySecret("unlabel-"+f.ns), metav1.CreateOptions{})
		require.NoError(t, err)
		created.Labels = nil
		_, err = secrets.Update(ctx, created, metav1.UpdateOptions{})
		requireDenied(t, err, msgSecretType)
	})
	t.Run("creating a Secret of another type", func(t *testing.T) {
		s := inventorySecret("opaque-" + f.ns)
		s.Type = corev1.SecretTypeOpaque
		_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		requireDenied(t, err, msgSecretType)
	})

	compositionCases := []struct {
		name  string
		patch map[string]any
		msg   string
	}{
		{"changing a Composition's spec", map[string]any{"spec": map[string]any{"synthesizer": map[string]any{"name": "other"}}}, msgSpec},
		{"changing a Composition's labels", map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "other"}}}, msgLabels},
		{"adding an ownerReference to a Composition", map[string]any{"metadata": map[string]any{"ownerReferences": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "name": "missing", "uid": string(uuid.NewUUID())}}}}, msgOwnerReferences},
		{"adding a finalizer to a Composition", map[string]any{"metadata": map[string]any{"finalizers": []any{"example.com/hold"}}}, msgFinalizers},
		{"changing another annotation of a Composition", map[string]any{"metadata": map[string]any{"annotations": map[string]any{"owner": "someone-else"}}}, msgAnnotations},
		{"removing another annotation of a Composition", map[string]any{"metadata": map[string]any{"annotations": map[string]any{"owner": nil}}}, msgAnnotations},
	}
	for _, c := range compositionCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.compositions().Patch(ctx, "web", types.MergePatchType, mergePatch(t, c.patch), metav1.PatchOptions{})
			requireDenied(t, err, c.msg)
		})
	}

	t.Run("appending a foreign slice name", func(t *testing.T) {
		_, err := f.compositions().Patch(ctx, "web", types.JSONPatchType, appendSlice(t, f.synthesis, "web-enoslice-1", true), metav1.PatchOptions{}, "status")
		requireDenied(t, err, msgFamily)
	})
	t.Run("appending another synthesis's recovery slice", func(t *testing.T) {
		_, err := f.compositions().Patch(ctx, "web", types.JSONPatchType, appendSlice(t, f.synthesis, domain.RecoverySliceName("web", string(uuid.NewUUID()), "0123456789abcdef", 0), true), metav1.PatchOptions{}, "status")
		requireDenied(t, err, msgFamily)
	})
	t.Run("replacing Eno's slices with a recovery slice", func(t *testing.T) {
		patch := mergePatch(t, []map[string]any{{"op": "replace", "path": "/status/currentSynthesis/resourceSlices/0", "value": map[string]any{"name": domain.RecoverySliceName("web", f.synthesis, "0123456789abcdef", 0)}}})
		_, err := f.compositions().Patch(ctx, "web", types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
		requireDenied(t, err, msgAppendOnly)
	})
	t.Run("changing the synthesis in the status", func(t *testing.T) {
		patch := mergePatch(t, []map[string]any{{"op": "replace", "path": "/status/currentSynthesis/ready", "value": nil}})
		_, err := f.compositions().Patch(ctx, "web", types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
		requireDenied(t, err, msgStatusOther)
	})
	t.Run("creating a slice with a resource that is not deleted", func(t *testing.T) {
		s := recoverySlice(f.comp, f.synthesis, tombstone(f.ns, "gone"), map[string]any{"manifest": configMap(f.ns, "applied")})
		_, err := f.slices().Create(ctx, s, metav1.CreateOptions{})
		requireDenied(t, err, msgTombstones)
	})
	// Tombstones that would have Eno delete an object unchecked, or that a token holder could
	// aim at anything: each is refused. good is one the controller writes.
	good := tombstone(f.ns, "target")["manifest"].(string)
	twice := func(old, new string) string {
		require.Equal(t, 2, strings.Count(good, old), "the manifest has %s in both overrides", old)
		return strings.ReplaceAll(good, old, new)
	}
	constant := func(cond string) string { // the controller's template around another condition
		type override struct {
			Path      string `json:"path"`
			Value     string `json:"value"`
			Condition string `json:"condition"`
		}
		path := "self.metadata.annotations['" + domain.AnnotationDisableReconciliation + "']"
		ops := mergePatch(t, []override{{path, "true", "!(" + cond + ")"}, {path, "false", cond}})
		type meta struct {
			Name        string            `json:"name"`
			Namespace   string            `json:"namespace"`
			Annotations map[string]string `json:"annotations"`
		}
		return string(mergePatch(t, struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   meta   `json:"metadata"`
		}{"v1", "ConfigMap", meta{"target", f.ns, map[string]string{domain.AnnotationDisableReconciliation: "true", domain.AnnotationOverrides: string(ops)}}}))
	}
	const and = `\\u0026\\u0026 ((has(`
	tombstoneCases := []struct{ name, manifest, msg string }{
		{"a plain tombstone", configMap(f.ns, "target"), msgSelfCheckForm},
		{"a tombstone disabled, with no overrides", kubetest.Manifest("v1", "ConfigMap", f.ns, "target", nil, map[string]string{domain.AnnotationDisableReconciliation: "true"}, nil), msgSelfCheckForm},
		{"a tombstone whose condition is the constant true", constant("true"), msgSelfCheckPins},
		{"a condition that does not begin by pinning the uid", twice(`self.metadata.uid == `, `self.metadata.uid != `), msgSelfCheckPins},
		{"a condition that pins the uid only", constant(`self.metadata.uid == "0123" && true`), msgSelfCheckPins},
		{"a condition with || true between its pins", twice(and, `|| true || ((has(`), msgSelfCheckPins},
		{"a condition with || after its first conjunct", twice(`\\u0026\\u0026 composition.metadata.deletionTimestamp`, `|| true || composition.metadata.deletionTimestamp`), msgSelfCheckPins},
		{"a condition with ?: between its pins", twice(and, `\\u0026\\u0026 true ? true : ((has(`), msgSelfCheckPins},
		{"a condition whose parentheses close early", twice(and, `\\u0026\\u0026 true) || (((has(`), msgSelfCheckPins},
		{"a condition that ends in a comment", twice(and, `\\u0026\\u0026 true // ((has(`), msgSelfCheckPins},
		{"a condition hiding || in a triple-quoted string", twice(and, `\\u0026\\u0026 \\\"\\\"\\\"(\\\"\\\"\\\" || true || (\\\"\\\"\\\")\\\"\\\"\\\" \\u0026\\u0026 ((has(`), msgSelfCheckPins},
		{"a first override that is not the negation of the second", strings.Replace(good, `\"condition\":\"!(`, `\"condition\":\"false \\u0026\\u0026 !(`, 1), msgSelfCheckPins},
		{"a first override whose condition is not the second's", strings.Replace(good, `self.metadata.uid == `, `self.metadata.name == `, 1), msgSelfCheckPins},
		{"a tombstone with reconciliation enabled", strings.Replace(good, `"`+domain.AnnotationDisableReconciliation+`":"true"`, `"`+domain.AnnotationDisableReconciliation+`":"false"`, 1), msgSelfCheckForm},
		{"a second disable-reconciliation annotation", strings.TrimSuffix(good, "}}}") + `,"z":"x","` + domain.AnnotationDisableReconciliation + `":"false"}}}`, msgSelfCheckForm},
		{"a second overrides annotation, its key escaped", strings.TrimSuffix(good, "}}}") + `,"eno.azure.io\/overrides":"[]"}}}`, msgSelfCheckForm},
		{"a second metadata, its key escaped", strings.TrimSuffix(good, "}") + `,"metad\u0061ta":{"name":"target"}}`, msgSelfCheckForm},
		{"a field besides metadata", strings.Replace(good, `"kind":"ConfigMap",`, `"kind":"ConfigMap","data":{"a":"b"},`, 1), msgSelfCheckForm},
	}
	for _, c := range tombstoneCases {
		t.Run("creating a recovery slice holding "+c.name, func(t *testing.T) {
			s := recoverySlice(f.comp, f.synthesis, tombstone(f.ns, "fine"), map[string]any{"manifest": c.manifest, "deleted": true})
			_, err := f.slices().Create(ctx, s, metav1.CreateOptions{})
			requireDenied(t, err, c.msg)
		})
	}
	t.Run("the wired eno-reconciler's identity, Eno impersonating ours, is confined too", func(t *testing.T) {
		wired := kubetest.NewClients(t, wiredConfig()).Dynamic
		s := recoverySlice(f.comp, f.synthesis, map[string]any{"manifest": configMap(f.ns, "target"), "deleted": true})
		_, err := wired.Resource(kubetest.ResourceSliceResource).Namespace(f.ns).Create(ctx, s, metav1.CreateOptions{})
		requireDenied(t, err, msgSelfCheckForm)
		patch := mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{domain.AnnotationArmed: "0123456789abcdef"}}})
		_, err = wired.Resource(kubetest.CompositionResource).Namespace(f.ns).Patch(ctx, "disarmed", types.MergePatchType, patch, metav1.PatchOptions{})
		requireDenied(t, err, msgDisarmed)
		_, err = wired.Resource(kubetest.ResourceSliceResource).Namespace(f.ns).Create(ctx, recoverySlice(f.comp, f.synthesis, tombstone(f.ns, "gone")), metav1.CreateOptions{})
		require.NoError(t, err, "a tombstone that checks itself is allowed")
	})
	for _, c := range []struct {
		name  string
		armed any
	}{{"re-arming a disarmed Composition", "0123456789abcdef"}, {"lifting a disarmed Composition's brake", nil}, {"marking a disarmed hand-off done", domain.ArmedDone}} {
		t.Run(c.name, func(t *testing.T) {
			patch := mergePatch(t, map[string]any{"metadata": map[string]any{"annotations": map[string]any{domain.AnnotationArmed: c.armed}}})
			_, err := f.compositions().Patch(ctx, "disarmed", types.MergePatchType, patch, metav1.PatchOptions{})
			requireDenied(t, err, msgDisarmed)
		})
	}
	t.Run("re-arming a disarmed Composition by update is denied by RBAC, before admission", func(t *testing.T) {
		live, err := f.compositions().Get(ctx, "disarmed", metav1.GetOptions{})
		require.NoError(t, err)
		ann := live.GetAnnotations()
		ann[domain.AnnotationArmed] = "0123456789abcdef"
		live.SetAnnotations(ann)
		_, err = f.compositions().Update(ctx, live, metav1.UpdateOptions{})
		requireDeniedByRBAC(t, err, "update", "compositions")
	})
	t.Run("creating a recovery slice no Composition controls", func(t *testing.T) {
		s := recoverySlice(f.comp, f.synthesis, tombstone(f.ns, "gone"))
		s.SetOwnerReferences(nil)
		_, err := f.slices().Create(ctx, s, metav1.CreateOptions{})
		requireDenied(t, err, msgSliceOwner)
	})
	t.Run("turning a resource of Eno's own slice into a tombstone", func(t *testing.T) {
		live, err := f.slices().Get(ctx, "web-enoslice-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedSlice(live.Object, []any{tombstone(f.ns, "kept")}, "spec", "resources"))
		_, err = f.slices().Update(ctx, live, metav1.UpdateOptions{})
		requireDeniedByRBAC(t, err, "update", "resourceslices")
	})
	t.Run("rewriting a recovery slice to apply a resource", func(t *testing.T) {
		created, err := f.admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(f.ns).Create(ctx, recoverySlice(f.comp, f.synthesis, tombstone(f.ns, "gone")), metav1.CreateOptions{})
		require.NoError(t, err)
		live, err := f.slices().Get(ctx, created.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedSlice(live.Object, []any{map[string]any{"manifest": configMap(f.ns, "applied")}}, "spec", "resources"))
		_, err = f.slices().Update(ctx, live, metav1.UpdateOptions{})
		requireDeniedByRBAC(t, err, "update", "resourceslices")
	})
	t.Run("deleting a slice is denied by RBAC, before admission", func(t *testing.T) {
		requireDeniedByRBAC(t, f.slices().Delete(ctx, "web-enoslice-0", metav1.DeleteOptions{}), "delete", "resourceslices")
	})
}

// requireDeniedByRBAC: the write was refused by RBAC, before admission saw it.
func requireDeniedByRBAC(t *testing.T, err error, verb, resource string) {
	t.Helper()
	require.Error(t, err, "the %s was allowed", verb)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), `cannot `+verb+` resource "`+resource+`"`)
	assert.NotContains(t, err.Error(), "ValidatingAdmissionPolicy")
}
