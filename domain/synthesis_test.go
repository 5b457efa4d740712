package domain_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

func TestReadSynthesisGoldenAcrossSlicesWithPatchesAndTombstones(t *testing.T) {
	m := goldenManifests()
	c := composition()
	c.Synthesis.Slices = []string{"s1", "s2"}
	got, err := domain.ReadSynthesis(c, []domain.ResourceSlice{
		slice("s1",
			domain.SliceResource{Manifest: m[2]},
			domain.SliceResource{Manifest: patchManifest("v1", "Service", "team-a", "kube-dns")},
			domain.SliceResource{Manifest: manifest("v1", "Secret", "team-a", "old"), Deleted: true}),
		slice("s2",
			domain.SliceResource{Manifest: m[0]},
			domain.SliceResource{Manifest: patchManifest("apps/v1", "Deployment", "kube-system", "coredns")},
			domain.SliceResource{Manifest: m[1]}),
	})
	require.NoError(t, err)
	inv := got.Inventory()
	assert.Equal(t, goldenCanonical, string(inv.Canonical()), "patches and tombstones are not recorded")
	assert.Equal(t, goldenDigest, inv.Digest())
	assert.Equal(t, 3, inv.Len())
}

func TestReadSynthesisCovers(t *testing.T) {
	got := readSynthesis(t,
		manifest("v1", "ConfigMap", "ns", "produced"),
		patchManifest("apps/v1", "Deployment", "kube-system", "coredns"),
		patchManifest("v1", "Service", "", "cluster-svc"),
	)
	// Tombstones come in their own resources.
	c := composition()
	withTombstones, err := domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice,
		domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "produced")},
		domain.SliceResource{Manifest: manifest("rbac.authorization.k8s.io/v1", "Role", "ns", "gone"), Deleted: true},
		domain.SliceResource{Manifest: patchManifest("v1", "Secret", "ns", "unpatched"), Deleted: true},
	)})
	require.NoError(t, err)
	tests := []struct {
		name     string
		contents domain.SynthesisContents
		id       domain.ResourceID
		want     bool
	}{
		{"produced", got, domain.ResourceID{Kind: "ConfigMap", Namespace: "ns", Name: "produced"}, true},
		{"patch target uses the patch's group and kind", got, domain.ResourceID{Group: "apps", Kind: "Deployment", Namespace: "kube-system", Name: "coredns"}, true},
		{"cluster-scoped patch target", got, domain.ResourceID{Kind: "Service", Name: "cluster-svc"}, true},
		{"the Patch object itself is not a resource", got, domain.ResourceID{Group: "eno.azure.io", Kind: "Patch", Namespace: "kube-system", Name: "coredns"}, false},
		{"other namespace", got, domain.ResourceID{Kind: "ConfigMap", Namespace: "other", Name: "produced"}, false},
		{"other group", got, domain.ResourceID{Group: "apps", Kind: "ConfigMap", Namespace: "ns", Name: "produced"}, false},
		{"recorded cluster-scoped, produced with a namespace the server ignores", got, domain.ResourceID{Kind: "ConfigMap", Name: "produced"}, true},
		{"recorded cluster-scoped, patched with a namespace", got, domain.ResourceID{Group: "apps", Kind: "Deployment", Name: "coredns"}, true},
		{"unknown", got, domain.ResourceID{Kind: "Secret", Namespace: "ns", Name: "x"}, false},
		{"existing tombstone", withTombstones, domain.ResourceID{Group: "rbac.authorization.k8s.io", Kind: "Role", Namespace: "ns", Name: "gone"}, true},
		{"a tombstoned Patch's target counts as covered: when in doubt, keep", withTombstones, domain.ResourceID{Kind: "Secret", Namespace: "ns", Name: "unpatched"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.contents.Covers(tt.id))
		})
	}
	assert.Equal(t, 1, got.Inventory().Len(), "only the produced resource is recorded")
	assert.Equal(t, 1, withTombstones.Inventory().Len(), "tombstones are not recorded")
}

func TestReadSynthesisEntryContents(t *testing.T) {
	got := readSynthesis(t,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","labels":{},`+
			`"annotations":{"eno.azure.io/readiness-group":"","eno.azure.io/deletion-group":"4","other":"x"}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b","namespace":"ns","annotations":{"x":"y"}}}`,
	)
	entries := got.Inventory().Entries()
	require.Len(t, entries, 2)
	assert.Equal(t, domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a",
		Annotations: map[string]string{domain.AnnotationDeletionGroup: "4"}}, entries[0])
	assert.Equal(t, domain.Entry{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "b"}, entries[1])
}

// Stock Eno stamps a slice with the synthesis current when its executor wrote it: "" on a
// first synthesis and the previous UUID after that (observed on v0.2.17, design §2). Membership is
// the Composition's resourceSlices list alone.
func TestReadSynthesisIgnoresEnosSynthesisStamp(t *testing.T) {
	good := domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "a")}
	for _, stamp := range []string{"", oldSynUUID, synUUID, "anything"} {
		t.Run(fmt.Sprintf("stamp %q", stamp), func(t *testing.T) {
			c := composition()
			contents, err := domain.ReadSynthesis(c, []domain.ResourceSlice{{Name: goldenSlice, SynthesisUUID: stamp, Resources: []domain.SliceResource{good}}})
			require.NoError(t, err)
			assert.Equal(t, 1, contents.Inventory().Len())
		})
	}
}

func TestReadSynthesisErrors(t *testing.T) {
	good := domain.SliceResource{Manifest: manifest("v1", "ConfigMap", "ns", "a")}
	bad := func(m string) domain.SliceResource { return domain.SliceResource{Manifest: m} }
	tests := []struct {
		name    string
		slices  []domain.ResourceSlice
		slice   string
		problem domain.SliceProblem
	}{
		{"terminating", []domain.ResourceSlice{{Name: goldenSlice, SynthesisUUID: synUUID, Deleting: true, Resources: []domain.SliceResource{good}}},
			goldenSlice, domain.SliceTerminating},
		{"named slice not given", nil, goldenSlice, domain.SliceMissing},
		{"named slice replaced by another", []domain.ResourceSlice{slice("other", good)}, goldenSlice, domain.SliceMissing},
		{"not JSON", []domain.ResourceSlice{slice(goldenSlice, good, bad("apiVersion: v1\nkind: ConfigMap"))}, goldenSlice, domain.SliceMalformed},
		{"empty manifest", []domain.ResourceSlice{slice(goldenSlice, bad(""))}, goldenSlice, domain.SliceMalformed},
		{"JSON array", []domain.ResourceSlice{slice(goldenSlice, bad("[]"))}, goldenSlice, domain.SliceMalformed},
		{"JSON null", []domain.ResourceSlice{slice(goldenSlice, bad("null"))}, goldenSlice, domain.SliceMalformed},
		{"truncated", []domain.ResourceSlice{slice(goldenSlice, bad(goldenManifests()[0][:40]))}, goldenSlice, domain.SliceMalformed},
		{"missing apiVersion", []domain.ResourceSlice{slice(goldenSlice, bad(`{"kind":"ConfigMap","metadata":{"name":"a"}}`))}, goldenSlice, domain.SliceMalformed},
		{"missing kind", []domain.ResourceSlice{slice(goldenSlice, bad(`{"apiVersion":"v1","metadata":{"name":"a"}}`))}, goldenSlice, domain.SliceMalformed},
		{"missing name", []domain.ResourceSlice{slice(goldenSlice, bad(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"a"}}`))}, goldenSlice, domain.SliceMalformed},
		{"missing metadata", []domain.ResourceSlice{slice(goldenSlice, bad(`{"apiVersion":"v1","kind":"ConfigMap"}`))}, goldenSlice, domain.SliceMalformed},
		{"apiVersion without version", []domain.ResourceSlice{slice(goldenSlice, bad(manifest("apps/", "Deployment", "ns", "a")))}, goldenSlice, domain.SliceMalformed},
		{"wrong type for name", []domain.ResourceSlice{slice(goldenSlice, bad(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":3}}`))}, goldenSlice, domain.SliceMalformed},
		{"tombstone without name", []domain.ResourceSlice{slice(goldenSlice, domain.SliceResource{Manifest: `{"apiVersion":"v1","kind":"ConfigMap"}`, Deleted: true})}, goldenSlice, domain.SliceMalformed},
		{"Patch without target", []domain.ResourceSlice{slice(goldenSlice, bad(`{"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"name":"a"}}`))}, goldenSlice, domain.SliceMalformed},
		{"Patch target without kind", []domain.ResourceSlice{slice(goldenSlice, bad(`{"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"name":"a"},"patch":{"apiVersion":"v1"}}`))}, goldenSlice, domain.SliceMalformed},
		{"bad resource in the second slice", []domain.ResourceSlice{slice(goldenSlice, good), slice("s2", bad("{"))}, "s2", domain.SliceMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			if len(tt.slices) > 1 {
				c.Synthesis.Slices = []string{tt.slices[0].Name, tt.slices[1].Name}
			}
			_, err := domain.ReadSynthesis(c, tt.slices)
			var se *domain.SliceError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.problem, se.Problem, "%v", err)
			assert.Equal(t, tt.slice, se.Slice)
			assert.True(t, domain.IsSliceError(err))
			assert.Contains(t, err.Error(), tt.problem.String())
		})
	}
}

func TestReadSynthesisDuplicateIdentity(t *testing.T) {
	tests := map[string][][]string{
		"same slice":             {{manifest("v1", "ConfigMap", "ns", "a"), manifest("v1", "ConfigMap", "ns", "a")}},
		"across slices":          {{manifest("v1", "ConfigMap", "ns", "a")}, {manifest("v1", "ConfigMap", "ns", "a")}},
		"two versions of one id": {{manifest("apps/v1", "Deployment", "ns", "a"), manifest("apps/v1beta1", "Deployment", "ns", "a")}},
	}
	for name, bySlice := range tests {
		t.Run(name, func(t *testing.T) {
			c := composition()
			c.Synthesis.Slices = nil
			var slices []domain.ResourceSlice
			for i, ms := range bySlice {
				s := slice(string(rune('a'+i)), resources(ms...)...)
				slices = append(slices, s)
				c.Synthesis.Slices = append(c.Synthesis.Slices, s.Name)
			}
			_, err := domain.ReadSynthesis(c, slices)
			var se *domain.SliceError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, domain.SliceMalformed, se.Problem)
			var dup *domain.DuplicateEntryError
			require.ErrorAs(t, err, &dup)
			assert.Equal(t, "a", dup.ID.Name)
		})
	}
}

func TestReadSynthesisNoSynthesis(t *testing.T) {
	c := composition()
	c.Synthesis = nil
	_, err := domain.ReadSynthesis(c, nil)
	assert.Error(t, err)
	c = composition()
	c.Synthesis.UUID = ""
	_, err = domain.ReadSynthesis(c, []domain.ResourceSlice{{Name: goldenSlice}})
	assert.Error(t, err)
}

func TestReadSynthesisEmpty(t *testing.T) {
	c := composition()
	c.Synthesis.Slices = nil
	got, err := domain.ReadSynthesis(c, nil)
	require.NoError(t, err)
	assert.Equal(t, "[]", string(got.Inventory().Canonical()))
	assert.False(t, got.Covers(cmID))
}

func TestSliceErrorUnwrap(t *testing.T) {
	inner := errors.New("boom")
	err := &domain.SliceError{Slice: "s", Problem: domain.SliceUnreadable, Detail: "d", Err: inner}
	assert.ErrorIs(t, err, inner)
	assert.Equal(t, "resource slice s is Unreadable: d: boom", err.Error())
	assert.False(t, domain.IsSliceError(inner))
}

// identical takeover: an identity any slice of another Composition applies or patches counts; tombstones,
// unreadable manifests and the excluded owners' slices do not.
func TestProducedElsewhere(t *testing.T) {
	cm := func(name string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"ns","name":"` + name + `"}}`
	}
	patch := `{"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"namespace":"ns","name":"patched"},"patch":{"apiVersion":"apps/v1","kind":"Deployment","ops":[]}}`
	all := []domain.ResourceSlice{
		{Namespace: "team-b", Name: "other-1", ControllerUID: "uid-other", Resources: []domain.SliceResource{
			{Manifest: cm("taken")}, {Manifest: cm("tombstoned"), Deleted: true}, {Manifest: "not json"}, {Manifest: patch}}},
		{Namespace: "team-a", Name: "old-1", ControllerUID: "uid-old", Resources: []domain.SliceResource{{Manifest: cm("old")}}},
		{Namespace: "team-a", Name: "self-1", ControllerUID: "uid-self", Resources: []domain.SliceResource{{Manifest: cm("own")}}},
		{Namespace: "team-c", Name: "gone-1", ControllerUID: "uid-gone", Deleting: true, Resources: []domain.SliceResource{{Manifest: cm("collected")}}},
		{Namespace: "team-c", Name: "uncontrolled", Resources: []domain.SliceResource{{Manifest: cm("by-hand")}}},
	}
	var productions []domain.Production
	for _, s := range all {
		productions = append(productions, domain.ProductionOf(s))
	}
	cmID := func(name string) domain.ResourceID {
		return domain.ResourceID{Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	ids := []domain.ResourceID{cmID("taken"), cmID("tombstoned"), cmID("old"), cmID("own"), cmID("collected"), cmID("by-hand"), cmID("absent"),
		{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "patched"}, {Kind: "Namespace", Name: "ns"}, {Kind: "Namespace", Name: "empty"}}
	got := domain.ProducedElsewhere(productions, ids, "uid-self", "uid-old")
	assert.Equal(t, map[domain.ResourceID]string{
		cmID("taken"): "team-b/other-1",
		{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "patched"}: "team-b/other-1",
		// Eno still applies a terminating slice its synthesis names while the finalizer holds.
		cmID("collected"): "team-c/gone-1",
	}, got)
	assert.Len(t, domain.ProducedElsewhere(productions, ids, "uid-self"), 4, "the old incarnation's slices count unless excluded")
	assert.Empty(t, domain.ProducedElsewhere(productions, []domain.ResourceID{cmID("absent")}), "asked only about identities")

	// A ClusterRole recorded without a namespace is the object another Composition applies with
	// one: the API server ignores a namespace on a cluster-scoped object.
	role := domain.ResourceID{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "web-reader"}
	withNamespace := domain.ProductionOf(domain.ResourceSlice{Namespace: "team-b", Name: "b-1", ControllerUID: "uid-b", Resources: []domain.SliceResource{
		{Manifest: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"namespace":"team-b","name":"web-reader"}}`}}})
	assert.Equal(t, map[domain.ResourceID]string{role: "team-b/b-1"}, domain.ProducedElsewhere([]domain.Production{withNamespace}, []domain.ResourceID{role}))
	recovery := domain.ProductionOf(domain.ResourceSlice{Namespace: "team-a", Name: "web-recovery-1", ControllerUID: "uid-a",
		Annotations: map[string]string{domain.AnnotationSourceUID: "old"},
		Resources:   []domain.SliceResource{{Deleted: true, Manifest: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"web-reader"}}`}}})
	assert.True(t, withNamespace.Threatens(recovery), "the watch sees it too")
}

// A pending hand-off's watch looks again on the event itself: a slice of another Composition
// that starts to produce a tombstone's identity.
func TestProductionThreatens(t *testing.T) {
	res := func(deleted bool, kind, ns, name string) domain.SliceResource {
		return domain.SliceResource{Deleted: deleted, Manifest: `{"apiVersion":"v1","kind":"` + kind + `","metadata":{"namespace":"` + ns + `","name":"` + name + `"}}`}
	}
	recovery := domain.ProductionOf(domain.ResourceSlice{Namespace: "a", Name: "web-recovery-1", ControllerUID: "self",
		Annotations: map[string]string{domain.AnnotationSourceUID: "old"},
		Resources:   []domain.SliceResource{res(true, "ConfigMap", "a", "orphan")}})
	of := func(owner string, rs ...domain.SliceResource) domain.Production {
		return domain.ProductionOf(domain.ResourceSlice{Namespace: "b", Name: "s", ControllerUID: owner, Resources: rs})
	}
	for name, tt := range map[string]struct {
		p    domain.Production
		want bool
	}{
		"another applies a tombstone's identity": {of("other", res(false, "ConfigMap", "a", "orphan")), true},
		"another produces something else":        {of("other", res(false, "ConfigMap", "a", "kept")), false},
		"another tombstones it too":              {of("other", res(true, "ConfigMap", "a", "orphan")), false},
		"the hand-off's own Composition":         {of("self", res(false, "ConfigMap", "a", "orphan")), false},
		"the recorded incarnation":               {of("old", res(false, "ConfigMap", "a", "orphan")), false},
		"no owner":                               {of("", res(false, "ConfigMap", "a", "orphan")), false},
	} {
		assert.Equal(t, tt.want, tt.p.Threatens(recovery), name)
	}
	plain := of("other", res(true, "ConfigMap", "a", "orphan"))
	assert.False(t, of("x", res(false, "ConfigMap", "a", "orphan")).Threatens(plain), "only recovery slices (with a source) are watched")
}

// The watch's lookup holds only recovery slices and finds those a slice threatens by its own
// identities: a namespaced producer for a cluster-scoped tombstone, once per recovery slice, and
// nothing of a slice replaced or deleted.
func TestThreats(t *testing.T) {
	res := func(deleted bool, kind, ns, name string) domain.SliceResource {
		return domain.SliceResource{Deleted: deleted, Manifest: `{"apiVersion":"v1","kind":"` + kind + `","metadata":{"namespace":"` + ns + `","name":"` + name + `"}}`}
	}
	recovery := func(name string, rs ...domain.SliceResource) domain.Production {
		return domain.ProductionOf(domain.ResourceSlice{Namespace: "a", Name: name, ControllerUID: "self",
			Annotations: map[string]string{domain.AnnotationSourceUID: "old"}, Resources: rs})
	}
	other := domain.ProductionOf(domain.ResourceSlice{Namespace: "b", Name: "s", ControllerUID: "other", Resources: []domain.SliceResource{
		res(false, "ConfigMap", "a", "orphan"), res(false, "ConfigMap", "a", "second"), res(false, "PersistentVolume", "b", "pv")}})

	var w domain.Threats[string]
	assert.Empty(t, w.Of(other), "nothing held")
	w.Set(recovery("r1", res(true, "ConfigMap", "a", "orphan"), res(true, "ConfigMap", "a", "second")), "r1")
	w.Set(recovery("r2", res(true, "PersistentVolume", "", "pv")), "r2")
	w.Set(recovery("r3", res(true, "ConfigMap", "a", "kept")), "r3")
	w.Set(domain.ProductionOf(domain.ResourceSlice{Namespace: "a", Name: "plain", ControllerUID: "self",
		Resources: []domain.SliceResource{res(true, "ConfigMap", "a", "orphan")}}), "plain")
	got := w.Of(other)
	slices.Sort(got)
	assert.Equal(t, []string{"r1", "r2"}, got, "once each; a cluster-scoped tombstone is applied with any namespace; only recovery slices")
	assert.Empty(t, w.Of(recovery("r4", res(false, "ConfigMap", "a", "orphan"))), "the hand-off's own Composition")

	w.Set(recovery("r1", res(true, "ConfigMap", "a", "other-now")), "r1 again")
	w.Forget("a/r2")
	w.Forget("a/never-held")
	assert.Empty(t, w.Of(other), "a replaced or deleted slice is no longer watched")
	w.Set(recovery("r1"), "r1 emptied")
	assert.Empty(t, w.Of(domain.ProductionOf(domain.ResourceSlice{Namespace: "b", Name: "t", ControllerUID: "other",
		Resources: []domain.SliceResource{res(false, "ConfigMap", "a", "other-now")}})), "a slice without tombstones is dropped")
}
