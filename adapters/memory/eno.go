package memory

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Eno is a model of stock Eno v0.2.17 (eno-controller, its executor and eno-reconciler) acting
// on a Cluster. It models only these behaviours, each observed by running that release against
// a real API server:
//
//   - Synthesize: the executor writes the new synthesis's slices, owned by the Composition and
//     stamped with the Composition's current synthesis UUID ("" on its first synthesis, the
//     previous UUID after that). They hold the synthesizer's output, every tombstone found in
//     the current synthesis's slices (all that status.currentSynthesis.resourceSlices names,
//     a recovery slice included) whose object still exists downstream (not yet reconciled),
//     and a tombstone for every non-Patch resource of the current synthesis that the new
//     output lacks. Then the new synthesis is promoted: a new UUID, synthesized, not Ready,
//     resourceSlices = the new slices, and no synthesis in flight.
//   - ResynthesizeIfForced: eno.azure.io/force-resynthesis equal to the in-flight synthesis's
//     UUID, or the current one's when none is in flight, starts a new synthesis with the same
//     synthesizer output. Eno never clears the annotation; once the new synthesis is promoted
//     the annotation names an older one and does nothing, and each requested UUID is acted on
//     once.
//   - Reconcile: eno-reconciler applies the current synthesis downstream (every manifest that
//     is not a tombstone exists, every tombstone's object is deleted), then marks it Ready.
//
// Nothing else is modelled: slices are split by count, not size; a synthesis is written and
// promoted in one step; Patches are not applied; there is no cooldown, readiness group, slice
// cleanup or per-process cache of loaded syntheses. Synthesis UUIDs come from a counter, so
// runs repeat. Its writes bypass the BeforeWrite hook: they are Eno's, not the controller's.
// Use one Eno per Cluster.
type Eno struct {
	cluster *Cluster
	now     func() time.Time
	// ResourcesPerSlice is the most resources one slice holds; 0 puts them all in one slice.
	// Set it before the first synthesis.
	ResourcesPerSlice int

	// Guarded by cluster.mu.
	syntheses uint64
	outputs   map[objectKey]synthesizerOutput
	forced    map[string]bool
}

// synthesizerOutput is what a Composition's synthesizer produced last.
type synthesizerOutput struct {
	uid       string
	manifests []string
}

// NewEno returns a model of stock Eno acting on c; now is the time stamped on each synthesis.
func NewEno(c *Cluster, now func() time.Time) *Eno {
	return &Eno{cluster: c, now: now, outputs: map[objectKey]synthesizerOutput{}, forced: map[string]bool{}}
}

// Synthesize makes a new synthesis of the Composition whose synthesizer produced manifests,
// and returns the Composition with it promoted. Nothing changes on an error.
func (e *Eno) Synthesize(ref domain.CompositionRef, manifests ...string) (domain.Composition, error) {
	c := e.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{ref.Namespace, ref.Name}
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, fmt.Errorf("synthesizing composition %s: %w", key, ports.ErrNotFound)
	}
	out, err := e.synthesizeLocked(cur, manifests)
	if err != nil {
		return domain.Composition{}, err
	}
	e.outputs[key] = synthesizerOutput{uid: cur.UID, manifests: slices.Clone(manifests)}
	return out, nil
}

// ResynthesizeIfForced makes the new synthesis the force-resynthesis annotation asks for, if
// it asks for one, with the synthesizer output of the Composition's last synthesis. It
// reports whether it did.
func (e *Eno) ResynthesizeIfForced(ref domain.CompositionRef) (domain.Composition, bool, error) {
	c := e.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{ref.Namespace, ref.Name}
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, false, fmt.Errorf("resynthesizing composition %s: %w", key, ports.ErrNotFound)
	}
	target := cur.InFlightSynthesis
	if target == "" {
		target = cur.SynthesisUUID()
	}
	want := cur.Annotations[domain.AnnotationForceResynthesis]
	if want == "" || want != target || e.forced[want] {
		return cloneComposition(cur), false, nil
	}
	output, ok := e.outputs[key]
	if !ok || output.uid != cur.UID {
		return domain.Composition{}, false, fmt.Errorf("resynthesizing composition %s: its synthesizer output is unknown; synthesize it with Eno first", key)
	}
	out, err := e.synthesizeLocked(cur, output.manifests)
	if err != nil {
		return domain.Composition{}, false, err
	}
	e.forced[want] = true
	return out, true, nil
}

// Reconcile applies the Composition's current synthesis downstream and marks it Ready. Every
// slice is read before anything is applied; a missing or unreadable one changes nothing.
func (e *Eno) Reconcile(ref domain.CompositionRef) (domain.Composition, error) {
	c := e.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{ref.Namespace, ref.Name}
	cur, ok := c.compositions[key]
	if !ok {
		return domain.Composition{}, fmt.Errorf("reconciling composition %s: %w", key, ports.ErrNotFound)
	}
	if cur.Synthesis == nil || cur.Synthesis.Synthesized.IsZero() {
		return domain.Composition{}, fmt.Errorf("reconciling composition %s: it has no synthesis yet", key)
	}
	changes, err := c.currentResourcesLocked(cur, "reconciling")
	if err != nil {
		return domain.Composition{}, err
	}
	for _, ch := range changes {
		disabled, err := c.disabledLocked(cur, ch)
		if err != nil {
			return domain.Composition{}, err
		}
		switch {
		case ch.m.patch, disabled:
		case ch.tombstone:
			delete(c.downstream, ch.m.id)
		default:
			c.applyDownstream(ch.m.id, ch.raw)
		}
	}
	cur = cloneComposition(cur)
	cur.Synthesis.Ready = true
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return cloneComposition(cur), nil
}

// synthesizeLocked writes the slices of a new synthesis of cur producing manifests and
// promotes it. Callers hold the lock.
func (e *Eno) synthesizeLocked(cur domain.Composition, manifests []string) (domain.Composition, error) {
	c := e.cluster
	key := objectKey{cur.Namespace, cur.Name}
	resources := make([]domain.SliceResource, 0, len(manifests))
	produced := make(map[domain.ResourceID]bool, len(manifests))
	for i, raw := range manifests {
		m, err := parseManifest(raw)
		if err != nil {
			return domain.Composition{}, fmt.Errorf("synthesizing composition %s: output %d: %w", key, i, err)
		}
		resources = append(resources, domain.SliceResource{Manifest: raw})
		produced[m.id] = true
	}

	// What the current synthesis leaves to the new one: tombstones not yet reconciled, and
	// a tombstone for each resource the new output lacks. The new output always wins.
	type tombstone struct {
		id  domain.ResourceID
		raw string
	}
	var tombstones []tombstone
	seen := map[domain.ResourceID]bool{}
	current, err := c.currentResourcesLocked(cur, "synthesizing")
	if err != nil {
		return domain.Composition{}, err
	}
	for _, r := range current {
		if r.m.patch || produced[r.m.id] || seen[r.m.id] {
			continue
		}
		if _, exists := c.downstream[r.m.id]; r.tombstone && !exists {
			continue // reconciled: Eno drops the tombstone
		}
		seen[r.m.id] = true
		tombstones = append(tombstones, tombstone{id: r.m.id, raw: r.raw})
	}
	slices.SortFunc(tombstones, func(a, b tombstone) int { return a.id.Compare(b.id) })
	for _, t := range tombstones {
		resources = append(resources, domain.SliceResource{Manifest: t.raw, Deleted: true})
	}

	e.syntheses++
	uuid := fmt.Sprintf("%08x-e0e0-4000-8000-%012x", e.syntheses, e.syntheses)
	per := e.ResourcesPerSlice
	if per <= 0 {
		per = max(len(resources), 1)
	}
	var names []string
	for chunk := range slices.Chunk(resources, per) {
		s := domain.ResourceSlice{Namespace: cur.Namespace, Name: fmt.Sprintf("%s-%s-%d", cur.Name, uuid[:8], len(names)),
			SynthesisUUID: cur.SynthesisUUID(), Resources: slices.Clone(chunk)}
		c.slices[objectKey{s.Namespace, s.Name}] = storedSlice{slice: s, owner: cur.UID, resourceVersion: c.nextVersion()}
		names = append(names, s.Name)
	}

	cur = cloneComposition(cur)
	cur.PreviousSynthesis = cur.Synthesis
	cur.Synthesis = &domain.Synthesis{UUID: uuid, Synthesized: e.now().UTC().Truncate(time.Second), Slices: names}
	cur.InFlightSynthesis = ""
	cur.ResourceVersion = c.nextVersion()
	c.compositions[key] = cur
	return cloneComposition(cur), nil
}

// sliceResource is one resource of a stored slice, its manifest parsed.
type sliceResource struct {
	m         manifest
	raw       string
	tombstone bool
}

// currentResourcesLocked reads every resource of cur's current synthesis, in slice order; a
// missing slice or an unparseable manifest is an error. Callers hold the lock.
func (c *Cluster) currentResourcesLocked(cur domain.Composition, verb string) ([]sliceResource, error) {
	if cur.Synthesis == nil {
		return nil, nil
	}
	key := objectKey{cur.Namespace, cur.Name}
	var out []sliceResource
	for _, name := range cur.Synthesis.Slices {
		s, ok := c.slices[objectKey{cur.Namespace, name}]
		if !ok {
			return nil, fmt.Errorf("%s composition %s: resource slice %s of synthesis %s: %w", verb, key, name, cur.Synthesis.UUID, ports.ErrNotFound)
		}
		for i, r := range s.slice.Resources {
			m, err := parseManifest(r.Manifest)
			if err != nil {
				return nil, fmt.Errorf("%s composition %s: resource slice %s, resource %d: %w", verb, key, name, i, err)
			}
			out = append(out, sliceResource{m: m, raw: r.Manifest, tombstone: r.Deleted})
		}
	}
	return out, nil
}

// disabledLocked reads disable-reconciliation as stock Eno's reconciler does: the resource's
// overrides are applied against the live object first (a condition that fails to evaluate
// applies nothing), then the resource's own value wins and the Composition's is the fallback.
// A resource whose reconciliation is disabled is left alone, even a tombstone. Callers hold the
// lock.
func (c *Cluster) disabledLocked(cur domain.Composition, ch sliceResource) (bool, error) {
	m := &unstructured.Unstructured{}
	if err := m.UnmarshalJSON([]byte(ch.raw)); err != nil {
		return false, fmt.Errorf("reconciling %s: %w", ch.m.id, err)
	}
	var live *unstructured.Unstructured
	if obj, ok := c.downstream[ch.m.id]; ok {
		live = &unstructured.Unstructured{}
		if err := live.UnmarshalJSON([]byte(obj.manifest)); err != nil {
			return false, fmt.Errorf("reconciling %s: the live object: %w", ch.m.id, err)
		}
		bare := domain.IsBare(live.Object) // no field to own: kube-apiserver tracks no managedFields
		live.SetUID(types.UID(obj.uid))
		live.SetCreationTimestamp(metav1.NewTime(obj.created))
		if !bare {
			live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "eno", Operation: metav1.ManagedFieldsOperationApply, Time: ptr(metav1.NewTime(obj.written))}})
		}
	}
	comp := &unstructured.Unstructured{Object: map[string]any{}}
	comp.SetName(cur.Name)
	comp.SetNamespace(cur.Namespace)
	comp.SetLabels(cur.Labels)
	comp.SetAnnotations(cur.Annotations)
	if cur.Deleting {
		comp.SetDeletionTimestamp(ptr(metav1.NewTime(c.now())))
	}
	snap, outcomes := enomodel.ApplyOverrides(m, live, comp)
	if slices.Contains(outcomes, enomodel.OverridePanics) {
		return false, fmt.Errorf("reconciling %s: an override has no path", ch.m.id)
	}
	if v, ok := snap.GetAnnotations()[domain.AnnotationDisableReconciliation]; ok {
		return v == "true", nil
	}
	return cur.Annotations[domain.AnnotationDisableReconciliation] == "true", nil
}

func ptr[T any](v T) *T { return &v }
