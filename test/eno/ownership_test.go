//go:build eno

package eno

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestRecoveryDeletesABareOrphan (design §6.3, BareOrphan): the first incarnation emits cm-e with
// no data. Applied by Eno it has no field to own, so the API server keeps no managedFields entry
// for it; it is still the recorded object (same UID, created before the history), and Eno
// deletes it once the recreated Composition no longer produces it.
func TestRecoveryDeletesABareOrphan(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "1"})
		synth := s.createOwnSynthesizer("bare", nil, emitted{name: "cm-a"}, emitted{name: "cm-e", data: map[string]string{}})
		inc := incarnations{first: synth, recreated: "synth-one", deploys: []string{"cm-a", "cm-e"}}
		uids, _, uid := s.recordThenRecreateAs(inc, 1, func() {
			cm, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx(), "cm-e", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(cm.ManagedFields) != 0 || len(cm.Data) != 0 {
				t.Fatalf("cm-e has data %v and managedFields %v: not a bare object", cm.Data, cm.ManagedFields)
			}
		})
		first := s.waitFirstSynthesis(uid)
		d := s.waitDecision(uid, first, "Recovered")
		if d.Tombstones != 1 {
			t.Errorf("decision %+v, want 1 tombstone: cm-e", d)
		}
		s.waitConfigMapGone("cm-e")
		s.requireDeletedByEno("cm-e")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})
	})
}

// TestRecoveryKeepsACoManagedObject (design §6.3, R3, co-managed before the history): a GitOps
// tool applies cm-b with the same content plus its own label, by server-side apply as
// kustomize-controller; the first incarnation then synthesizes again and is recorded, so the
// history postdates that write. Deleted with orphan and recreated without cm-b, the Composition
// hands Eno no tombstone of cm-b (ManagedElsewhere), and cm-b stays.
func TestRecoveryKeepsACoManagedObject(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "1"})
		created := s.createComposition(comp, "synth-two", map[string]string{optInAnnotation: "enabled", deletionStrategyAnnotation: "orphan"})
		uids := s.waitConfigMaps("cm-a", "cm-b")
		syn := s.waitReady(comp, "")
		s.waitRecorded(comp, created.GetUID(), syn.UUID, 1)

		s.applyAs("kustomize-controller", "cm-b", map[string]string{"kustomize.toolkit.fluxcd.io/name": "web"})
		s.annotate(comp, forceResynthesis, syn.UUID)
		again := s.waitReady(comp, syn.UUID)
		s.waitRecorded(comp, created.GetUID(), again.UUID, 1)

		s.deleteComposition(comp)
		s.requireUnchanged(uids)
		recreated := s.createComposition(comp, "synth-one", map[string]string{optInAnnotation: "enabled"})
		first := s.waitFirstSynthesis(recreated.GetUID())
		d := s.waitDecision(recreated.GetUID(), first, "NothingToRecover")
		t.Logf("decision: %s (%s): %s", d.Outcome, d.Reason, d.Message)
		if d.Reason != "Unverified" || !strings.Contains(d.Message, "ManagedElsewhere") || !strings.Contains(d.Message, "kustomize-controller") {
			t.Errorf("decision %+v, want Unverified with cm-b kept as ManagedElsewhere by kustomize-controller", d)
		}
		s.holdsFor("cm-b kept", observeFor, func(ctx context.Context) error {
			if uid, err := s.configMapUID(ctx, "cm-b"); err != nil || uid != uids["cm-b"] {
				return fmt.Errorf("cm-b: uid %s, %v; want %s", uid, err, uids["cm-b"])
			}
			return nil
		})
		s.requireNotDeletedByEno("cm-b")
	})
}

// TestRecoveryListsAnOrphanedNamespace (design §6.3, R1): the first incarnation deploys a
// Namespace of its own; recreated without it, recovery never hands it to Eno, approved or not,
// and names it with the command to delete it after looking, in the decision and in a Warning.
// The Namespace stays.
func TestRecoveryListsAnOrphanedNamespace(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "1"})
		nsName := s.ns + "-orphan"
		t.Cleanup(func() {
			_ = admin.Kube.CoreV1().Namespaces().Delete(context.Background(), nsName, metav1.DeleteOptions{})
		})
		synth := s.createOwnSynthesizer("namespace", nil, emitted{name: "cm-a"}, emitted{name: nsName, namespace: true})
		inc := incarnations{first: synth, recreated: "synth-one", deploys: []string{"cm-a"}}
		var nsUID types.UID
		_, _, uid := s.recordThenRecreateAs(inc, 1, func() {
			ns, err := admin.Kube.CoreV1().Namespaces().Get(s.ctx(), nsName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nsUID = ns.UID
		})
		first := s.waitFirstSynthesis(uid)
		s.annotate(comp, reviewAnnotation, "approve:"+first)
		d := s.waitDecision(uid, first, "NothingToRecover")
		command := "kubectl delete namespace " + nsName
		if d.TombstoneSlice != "" || !strings.Contains(d.Message, "CascadingKind") || !strings.Contains(d.Message, command) {
			t.Errorf("decision %+v, want no tombstone and Namespace %s listed with %q", d, nsName, command)
		}
		s.waitFor("a CascadingKind Warning naming Namespace "+nsName, waitLong, func(ctx context.Context) error {
			events, err := admin.Kube.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=CascadingKind"})
			if err != nil {
				return err
			}
			for _, e := range events.Items {
				if e.Type == "Warning" && strings.Contains(e.Message, "Namespace/"+nsName) && strings.Contains(e.Message, command) {
					return nil
				}
			}
			return fmt.Errorf("%d CascadingKind events, none names it", len(events.Items))
		})
		s.holdsFor("Namespace "+nsName+" kept", observeFor, func(ctx context.Context) error {
			ns, err := admin.Kube.CoreV1().Namespaces().Get(ctx, nsName, metav1.GetOptions{})
			if err != nil || ns.UID != nsUID || ns.DeletionTimestamp != nil {
				return fmt.Errorf("Namespace %s: %v, %v", nsName, err, ns)
			}
			return nil
		})
	})
}

// applyAs applies the ConfigMap's live data with labels added, by server-side apply as manager:
// a tool taking the object over, as Flux's kustomize-controller does.
func (s *scenario) applyAs(manager, name string, labels map[string]string) {
	s.t.Helper()
	live, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": s.ns, "labels": labels}, "data": live.Data})
	if err != nil {
		s.t.Fatal(err)
	}
	force := true
	if _, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Patch(s.ctx(), name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: manager, Force: &force}); err != nil {
		s.t.Fatalf("applying ConfigMap %s/%s as %s: %v", s.ns, name, manager, err)
	}
}
