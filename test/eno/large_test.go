//go:build eno

package eno

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// The large recovery's shape: largeObjects ConfigMaps, each with largeLabels labels of the
// longest key and value Kubernetes allows and a 253-character name, so that one tombstone
// manifest is about 4.7 KB and the hand-off about 1.8 MB: four recovery slices of at most
// enoSliceBytes each.
const (
	largeObjects = 400
	largeLabels  = 16
	// enoSliceBytes is Eno's slice budget (the executor's maxSliceJsonBytes), the sum of a
	// slice's manifests' lengths.
	enoSliceBytes = 512 << 10
	// largeWait bounds the waits on Eno that scale with the number of objects: deploying them
	// and deleting them, at eno-reconciler's client QPS, on two busy cores.
	largeWait = 2 * waitLong
)

// TestLargeRecoveryAcrossSlices: a recovery whose tombstones cross Eno's slice budget several
// times is carried and deleted by stock Eno. The first incarnation deploys cm-a and 400
// ConfigMaps with long names and many long labels, which the history records; it is deleted
// with orphan and recreated with cm-a alone. 400 of 401 resources would be deleted, over the
// deletion guard, so the recovery is held until it is approved. Approved, the hand-off is cut
// into at least three recovery slices (<comp>-recovery-<uuid8>, -1, -2, …) of at most 512 KiB
// of manifests, 1.5 MiB or more in all, named by the synthesis at the commit. Eno's executor
// carries every tombstone of every recovery slice into the next synthesis, and eno-reconciler
// deletes all 400 orphans and nothing else.
func TestLargeRecoveryAcrossSlices(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		began := time.Now()
		s := newScenario(t, m, settings{recovery: true})
		large := largeConfigMaps(largeObjects, largeLabels)
		names := make([]string, len(large))
		for i, cm := range large {
			names[i] = cm.name
		}
		all := s.createOwnSynthesizer("large", nil, append([]emitted{{name: "cm-a"}}, large...)...)
		kept := s.createOwnSynthesizer("kept", nil, emitted{name: "cm-a"})

		// The first incarnation deploys everything and is recorded.
		created := s.createComposition(comp, all, map[string]string{
			optInAnnotation:            "enabled",
			deletionStrategyAnnotation: "orphan",
		})
		uids := s.waitConfigMapSet(append([]string{"cm-a"}, names...), largeWait)
		deployed := s.waitReady(comp, "")
		s.waitDecision(created.GetUID(), deployed.UUID, "NoInventory")
		chunks := s.recordedChunks(comp, created.GetUID(), deployed.UUID)
		s.waitRecorded(comp, created.GetUID(), deployed.UUID, chunks)
		t.Logf("%d ConfigMaps deployed and recorded in %d chunks after %s", len(uids), chunks, time.Since(began).Round(time.Second))

		s.deleteComposition(comp)
		s.requireConfigMapSet(uids)
		recreated := s.createComposition(comp, kept, map[string]string{optInAnnotation: "enabled"})
		uid := recreated.GetUID()

		// Held by the deletion guard, then approved.
		first := s.waitFirstSynthesis(uid)
		held := s.waitDecision(uid, first, "HeldForReview")
		if held.Tombstones != largeObjects {
			t.Errorf("held decision %+v, want %d tombstones", held, largeObjects)
		}
		s.annotate(comp, reviewAnnotation, "approve:"+first)
		d := s.waitDecision(uid, first, "Recovered")
		t.Logf("decision: %s/%s: %s", d.Outcome, d.Reason, d.Message)
		if d.Reason != "Approved" || d.Tombstones != largeObjects || d.TombstoneSlice == "" {
			t.Errorf("decision %+v, want Recovered/Approved with %d tombstones in named slices", d, largeObjects)
		}

		// The commit named every recovery slice in the synthesis.
		recovery := s.waitCommittedRecoverySlices(first, 3)
		family := regexp.MustCompile(`^` + regexp.QuoteMeta(comp+"-recovery-"+first[:8]) + `-([0-9a-f]{16})-(\d+)$`)
		var digest string
		for i, name := range recovery {
			m := family.FindStringSubmatch(name)
			if m == nil || m[2] != strconv.Itoa(i) || (digest != "" && m[1] != digest) {
				t.Errorf("recovery slice %d of synthesis %s is %s, want part %d of one digest-named hand-off (slices %v)", i, first, name, i, recovery)
				continue
			}
			digest = m[1]
		}
		if d.TombstoneSlice != recovery[0] {
			t.Errorf("decision names slice %s, the synthesis names %v first", d.TombstoneSlice, recovery)
		}
		listed, err := s.recoverySlices(s.ctx(), comp)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(listed)
		if want := slices.Sorted(slices.Values(recovery)); !slices.Equal(listed, want) {
			t.Errorf("ResourceSlices named %s-recovery-*: %v, want exactly those the synthesis names: %v", comp, listed, want)
		}
		handed, total := s.requireRecoverySlicesHold(recovery, names)
		t.Logf("%d tombstones, %d bytes of manifests (%.2f MiB), in %d recovery slices: %v",
			handed, total, float64(total)/(1<<20), len(recovery), recovery)
		if total < 3<<19 {
			t.Errorf("the recovery slices hold %d bytes of manifests, want at least 1.5 MiB", total)
		}

		// Eno carries and deletes every orphan, and nothing else.
		s.waitConfigMapSet([]string{"cm-a"}, largeWait)
		carried := s.waitReady(comp, first)
		s.requireCarried(carried, names)
		requireNotRecovered(t, s.waitDecision(uid, carried.UUID, "NothingToRecover"))
		s.requireConfigMapSet(map[string]types.UID{"cm-a": uids["cm-a"]})
		s.requireDeletedByEnoExactly(names)
		t.Logf("%s: %d orphans deleted by Eno; scenario took %s", m.name, len(names), time.Since(began).Round(time.Second))
	})
}

// largeConfigMaps are n ConfigMaps named cm-large-<i>-xxx… (253 characters), each with labels
// labels whose keys (a 137-character prefix and a 63-character name) and values (63
// characters) are as long as Kubernetes allows.
func largeConfigMaps(n, labels int) []emitted {
	prefix := "." + strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + ".example.com/" + strings.Repeat("n", 63)
	out := make([]emitted, n)
	for i := range out {
		name := fmt.Sprintf("cm-large-%04d-", i)
		name += strings.Repeat("x", 253-len(name))
		l := make(map[string]string, labels)
		for j := range labels {
			value := fmt.Sprintf("v%04d-%02d-", i, j)
			l[fmt.Sprintf("l%02d", j)+prefix] = value + strings.Repeat("z", 63-len(value))
		}
		out[i] = emitted{name: name, labels: l}
	}
	return out
}

// configMapSet lists the scenario namespace's ConfigMaps (not being deleted) with their UIDs.
func (s *scenario) configMapSet(ctx context.Context) (map[string]types.UID, error) {
	list, err := admin.Kube.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	got := make(map[string]types.UID, len(list.Items))
	for _, cm := range list.Items {
		if cm.DeletionTimestamp == nil {
			got[cm.Name] = cm.UID
		}
	}
	return got, nil
}

// waitConfigMapSet waits until the namespace holds exactly the named ConfigMaps and returns
// their UIDs.
func (s *scenario) waitConfigMapSet(names []string, timeout time.Duration) map[string]types.UID {
	s.t.Helper()
	var got map[string]types.UID
	s.waitFor(fmt.Sprintf("exactly %d ConfigMaps in %s", len(names), s.ns), timeout, func(ctx context.Context) error {
		var err error
		if got, err = s.configMapSet(ctx); err != nil {
			return err
		}
		var missing []string
		for _, name := range names {
			if _, ok := got[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 || len(got) != len(names) {
			return fmt.Errorf("%d ConfigMaps, want %d; %d missing (first: %.40q)", len(got), len(names), len(missing), missing)
		}
		return nil
	})
	return got
}

// requireConfigMapSet asserts that the namespace holds exactly these ConfigMaps, with these UIDs.
func (s *scenario) requireConfigMapSet(want map[string]types.UID) {
	s.t.Helper()
	got, err := s.configMapSet(s.ctx())
	if err != nil {
		s.t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		var diff []string
		for name, uid := range want {
			if got[name] != uid {
				diff = append(diff, fmt.Sprintf("%.40s: uid %q, want %q", name, got[name], uid))
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				diff = append(diff, fmt.Sprintf("%.40s: unexpected", name))
			}
		}
		s.t.Fatalf("ConfigMaps of %s: %d, want %d untouched; first differences: %q", s.ns, len(got), len(want), diff[:min(len(diff), 5)])
	}
}

// recordedChunks waits until chunk 0 of the Composition's history is recorded from the
// incarnation uid's synthesis and returns the chunk count it announces.
func (s *scenario) recordedChunks(comp string, uid types.UID, synthesisUUID string) int {
	s.t.Helper()
	var chunks int
	s.waitFor(fmt.Sprintf("chunk 0 of %s/%s synthesis %s", s.ns, comp, synthesisUUID), waitLong, func(ctx context.Context) error {
		secret, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).Get(ctx, s.chunkName(comp, 0), metav1.GetOptions{})
		if err != nil {
			return err
		}
		a := secret.Annotations
		if a[sourceSynthesisAnnotation] != synthesisUUID || a[compositionUIDAnnotation] != string(uid) {
			return fmt.Errorf("Secret %s from synthesis %q of %q", secret.Name, a[sourceSynthesisAnnotation], a[compositionUIDAnnotation])
		}
		chunks, err = strconv.Atoi(a[chunkCountAnnotation])
		return err
	})
	return chunks
}

// waitCommittedRecoverySlices waits until the Composition's synthesis synthesisUUID, current
// or (once Eno resynthesized) previous, names at least least recovery slices, and returns
// them in the order it names them.
func (s *scenario) waitCommittedRecoverySlices(synthesisUUID string, least int) []string {
	s.t.Helper()
	var names []string
	s.waitFor(fmt.Sprintf("synthesis %s naming %d or more recovery slices", synthesisUUID, least), waitLong, func(ctx context.Context) error {
		u, err := s.getComposition(ctx, comp)
		if err != nil {
			return err
		}
		for _, field := range []string{"currentSynthesis", "previousSynthesis"} {
			uuid, _, _ := unstructured.NestedString(u.Object, "status", field, "uuid")
			if uuid != synthesisUUID {
				continue
			}
			refs, _, _ := unstructured.NestedSlice(u.Object, "status", field, "resourceSlices")
			var all []string
			names = names[:0]
			for _, r := range refs {
				m, _ := r.(map[string]any)
				name, _ := m["name"].(string)
				all = append(all, name)
				if strings.HasPrefix(name, comp+"-recovery-") {
					names = append(names, name)
				}
			}
			if len(names) >= least {
				s.t.Logf("synthesis %s (%s) names slices %v", synthesisUUID, field, all)
				return nil
			}
			return fmt.Errorf("synthesis %s (%s) names slices %v", synthesisUUID, field, all)
		}
		return fmt.Errorf("synthesis %s neither current nor previous: %+v", synthesisUUID, currentSynthesis(u))
	})
	return names
}

// requireRecoverySlicesHold asserts that the recovery slices hold, each within Eno's slice
// budget, one tombstone of each named ConfigMap and nothing else, and returns how many
// tombstones and bytes of manifests they hold.
func (s *scenario) requireRecoverySlicesHold(recovery, names []string) (tombstones, total int) {
	s.t.Helper()
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	seen := map[string]int{}
	for _, name := range recovery {
		u, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).Get(s.ctx(), name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatalf("reading recovery slice %s: %v", name, err)
		}
		resources, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
		bytes := 0
		for i, r := range resources {
			m, _ := r.(map[string]any)
			manifest, _ := m["manifest"].(string)
			bytes += len(manifest)
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string            `json:"name"`
					Namespace string            `json:"namespace"`
					Labels    map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(manifest), &obj); err != nil {
				s.t.Fatalf("recovery slice %s, resource %d: %v", name, i, err)
			}
			switch {
			case m["deleted"] != true || obj.Kind != "ConfigMap" || obj.Metadata.Namespace != s.ns || !want[obj.Metadata.Name]:
				s.t.Errorf("recovery slice %s, resource %d: %s %s/%.40s deleted=%v, want a tombstone of a large ConfigMap",
					name, i, obj.Kind, obj.Metadata.Namespace, obj.Metadata.Name, m["deleted"])
			case len(obj.Metadata.Labels) != largeLabels:
				s.t.Errorf("recovery slice %s: tombstone of %.40s carries %d labels, want the %d recorded", name, obj.Metadata.Name, len(obj.Metadata.Labels), largeLabels)
			}
			seen[obj.Metadata.Name]++
		}
		s.t.Logf("recovery slice %s: %d tombstones, %d bytes of manifests", name, len(resources), bytes)
		if bytes > enoSliceBytes {
			s.t.Errorf("recovery slice %s holds %d bytes of manifests, over Eno's slice budget of %d", name, bytes, enoSliceBytes)
		}
		tombstones += len(resources)
		total += bytes
	}
	for _, name := range names {
		if seen[name] != 1 {
			s.t.Errorf("the recovery slices hold %d tombstones of %.40s, want 1", seen[name], name)
		}
	}
	return tombstones, total
}

// requireCarried asserts that the synthesis's own slices (Eno's executor wrote them) hold a
// tombstone of each named ConfigMap: the executor carried them forward from every recovery
// slice of the synthesis before it.
func (s *scenario) requireCarried(syn synthesis, names []string) {
	s.t.Helper()
	carried := map[string]bool{}
	perSlice := map[string]int{}
	for _, name := range syn.Slices {
		sl := s.mustReadSlice(name)
		for _, r := range sl.resources {
			if r.Deleted && r.Kind == "ConfigMap" && r.Namespace == s.ns {
				carried[r.Name] = true
				perSlice[name]++
			}
		}
	}
	s.t.Logf("synthesis %s carries tombstones in its %d slices: %v", syn.UUID, len(syn.Slices), perSlice)
	var missing []string
	for _, name := range names {
		if !carried[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		s.t.Errorf("synthesis %s (slices %v) carries no tombstone of %d of the %d orphans (first: %.40q)", syn.UUID, syn.Slices, len(missing), len(names), missing)
	}
}

// requireDeletedByEnoExactly asserts that eno-reconciler's log records deleting each named
// ConfigMap of the namespace and no other resource of it, waiting up to logLag for the last lines.
func (s *scenario) requireDeletedByEnoExactly(names []string) {
	s.t.Helper()
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	var deleted map[string]bool
	s.waitFor(fmt.Sprintf("eno-reconciler's log records deleting %d ConfigMaps of %s", len(names), s.ns), logLag, func(context.Context) error {
		deleted = map[string]bool{}
		for _, line := range strings.Split(s.reconciler.log(), "\n") {
			if !strings.Contains(line, `"msg":"deleted resource"`) {
				continue
			}
			var l struct {
				Name      string `json:"resourceName"`
				Namespace string `json:"resourceNamespace"`
			}
			if at := strings.IndexByte(line, '{'); at >= 0 && json.Unmarshal([]byte(line[at:]), &l) == nil && l.Namespace == s.ns {
				deleted[l.Name] = true
			}
		}
		for name := range deleted {
			if !want[name] {
				return fmt.Errorf("deleted %.40s, which is no orphan", name)
			}
		}
		if len(deleted) != len(want) {
			return fmt.Errorf("%d deletions recorded, want %d", len(deleted), len(want))
		}
		return nil
	})
}
