//go:build eno

package eno

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// The Composition of every scenario: synth-two deploys cm-a and cm-b, synth-one only cm-a.
const comp = "web"

// TestEnoAlone checks the harness itself: with no Composition opted in, Eno deploys what the
// synthesizer emits and, when a new synthesis drops a resource, deletes it downstream. In the
// wired mode it also shows that eno-reconciler with the controller inside still works as Eno
// and leaves a Composition that did not opt in alone.
func TestEnoAlone(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{})
		s.createComposition(comp, "synth-two", nil)
		uids := s.waitConfigMaps("cm-a", "cm-b")
		first := s.waitReady(comp, "")

		s.setSynthesizer(comp, "synth-one")
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")
		s.waitReady(comp, first.UUID)
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})

		u, err := s.getComposition(s.ctx(), comp)
		if err != nil {
			t.Fatal(err)
		}
		if raw, ok := u.GetAnnotations()[decisionAnnotation]; ok {
			t.Errorf("a Composition that did not opt in got a decision: %s", raw)
		}
		secrets, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).List(s.ctx(),
			metav1.ListOptions{LabelSelector: "eno.azure.io/inventory-lineage=" + lineage(s.ns, comp)})
		if err != nil {
			t.Fatal(err)
		}
		if len(secrets.Items) > 0 {
			t.Errorf("a Composition that did not opt in got %d inventory Secrets", len(secrets.Items))
		}
	})
}

// incarnations are the two Compositions of a recovery scenario under one name: the first, opted
// in and set to orphan on deletion, and the recreated one, opted in.
type incarnations struct {
	first, recreated string // their Synthesizers
	// deploys are the ConfigMaps that exist once the first is ready.
	deploys []string
	// firstAnnotations and recreatedAnnotations are added to the opt-in (and, for the first,
	// the orphan strategy).
	firstAnnotations, recreatedAnnotations map[string]string
}

// twoThenOne is every scenario's default: synth-two deploys cm-a and cm-b, synth-one only cm-a.
var twoThenOne = incarnations{first: "synth-two", recreated: "synth-one", deploys: []string{"cm-a", "cm-b"}}

// recordThenRecreate runs the first half of every recovery scenario: the Composition, opted
// in and set to orphan on deletion, deploys cm-a and cm-b; its snapshot of chunks chunks is
// recorded; it is deleted (both ConfigMaps survive); damage, when set, is done to the history;
// it is recreated under the same name, opted in, with synth-one. It returns the ConfigMaps'
// UIDs, when the recreation happened and the new incarnation's UID.
func (s *scenario) recordThenRecreate(chunks int, damage func()) (map[string]types.UID, time.Time, types.UID) {
	s.t.Helper()
	return s.recordThenRecreateAs(twoThenOne, chunks, damage)
}

// recordThenRecreateAs is recordThenRecreate with the given incarnations; between, when set,
// runs after the deletion and before the recreation.
func (s *scenario) recordThenRecreateAs(inc incarnations, chunks int, between func()) (map[string]types.UID, time.Time, types.UID) {
	s.t.Helper()
	created := s.createComposition(comp, inc.first, withAnnotations(map[string]string{
		optInAnnotation:            "enabled",
		deletionStrategyAnnotation: "orphan",
	}, inc.firstAnnotations))
	uids := s.waitConfigMaps(inc.deploys...)
	syn := s.waitReady(comp, "")
	s.waitDecision(created.GetUID(), syn.UUID, "NoInventory")
	s.waitRecorded(comp, created.GetUID(), syn.UUID, chunks)

	s.deleteComposition(comp)
	s.requireUnchanged(uids)
	if between != nil {
		between()
	}

	recreatedAt := time.Now()
	recreated := s.createComposition(comp, inc.recreated, withAnnotations(map[string]string{optInAnnotation: "enabled"}, inc.recreatedAnnotations))
	return uids, recreatedAt, recreated.GetUID()
}

// withAnnotations returns base with extra added.
func withAnnotations(base, extra map[string]string) map[string]string {
	maps.Copy(base, extra)
	return base
}

// requireNotRecovered asserts a decision recovers nothing again (design §6: one recovery per
// incarnation from one source; within one incarnation Eno's own diff owns cleanup).
func requireNotRecovered(t *testing.T, d decision) {
	t.Helper()
	if d.Outcome != "NothingToRecover" || (d.Reason != "AlreadyDecided" && d.Reason != "SameIncarnation") {
		t.Fatalf("decision %+v, want NothingToRecover with reason AlreadyDecided or SameIncarnation", d)
	}
}

// requireStable asserts that for observeFor the Composition stays on synthesis uuid with
// nothing in flight, and that the executor does not run for it again.
func (s *scenario) requireStable(uuid string, since time.Time) {
	s.t.Helper()
	runs := len(s.syntheses(comp, since))
	s.holdsFor("no synthesis after "+uuid, observeFor, func(ctx context.Context) error {
		u, err := s.getComposition(ctx, comp)
		if err != nil {
			return err
		}
		if syn := currentSynthesis(u); syn.UUID != uuid || syn.InFlight != "" {
			return fmt.Errorf("synthesis moved on from %s: %+v", uuid, syn)
		}
		if n := len(s.syntheses(comp, since)); n != runs {
			return fmt.Errorf("the executor ran %d more time(s)", n-runs)
		}
		return nil
	})
}

// TestRecoveryDeletesOrphan is the end-to-end promise of design §6.2/§10: after record → delete
// with orphan → recreate without cm-b, Eno deletes cm-b downstream and leaves cm-a untouched;
// a forced resynthesis afterwards recovers nothing again and does not loop.
func TestRecoveryDeletesOrphan(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{recovery: true})
		uids, recreatedAt, uid := s.recordThenRecreate(1, nil)

		first := s.waitFirstSynthesis(uid)
		d := s.waitDecision(uid, first, "Recovered")
		if d.Tombstones != 1 || d.TombstoneSlice == "" {
			t.Errorf("decision %+v, want 1 tombstone in a named slice", d)
		}
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})

		// The synthesis that carried the tombstone: decided without recovering again, then recorded.
		carried := s.waitReady(comp, first)
		requireNotRecovered(t, s.waitDecision(uid, carried.UUID, "NothingToRecover"))
		if !s.carriesTombstone(carried, "cm-b") {
			t.Errorf("no slice of synthesis %s (%v) carries the tombstone of cm-b: Eno's executor did not carry it forward", carried.UUID, carried.Slices)
		}
		s.waitRecorded(comp, uid, carried.UUID, 1)
		// A recovery costs exactly one extra synthesis (README, BENCHMARKS.md): the recreated
		// Composition's first, then the one that carried the tombstone, and no other run.
		current, runs := s.history.currentSyntheses(uid), s.syntheses(comp, recreatedAt)
		t.Logf("syntheses of the recreated Composition up to the recovery's: %v (executor runs: %v)", current, runs)
		if want := []string{first, carried.UUID}; !slices.Equal(current, want) || !slices.Equal(runs, want) {
			t.Errorf("syntheses %v, executor runs %v; want exactly %v: the first and one carrying synthesis", current, runs, want)
		}

		// (c) A forced resynthesis afterwards: one new synthesis, nothing recovered, no loop.
		s.annotate(comp, forceResynthesis, carried.UUID)
		forced := s.waitReady(comp, carried.UUID)
		requireNotRecovered(t, s.waitDecision(uid, forced.UUID, "NothingToRecover"))
		s.requireStable(forced.UUID, recreatedAt)
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})

		// Named by neither the current nor the previous synthesis any more, the recovery slice is
		// Eno's to clean up: eno-controller releases its finalizer (eno.azure.io/cleanup) and
		// deletes it, so nothing of the hand-off is left behind.
		s.waitFor("recovery slice "+d.TombstoneSlice+" deleted by eno-controller", waitLong, func(ctx context.Context) error {
			_, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).Get(ctx, d.TombstoneSlice, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("still there")
			}
			return err
		})
	})
}

// TestInvalidHistoryDeletesNothing: a history that design §5 rejects makes no tombstones under real
// Eno either; the orphan stays and no recovery slice appears.
func TestInvalidHistoryDeletesNothing(t *testing.T) {
	cases := []struct {
		name          string
		maxChunkBytes int // 120: each ConfigMap's entry fits in a chunk, both do not
		chunks        int
		damage        func(s *scenario)
		reason        string
	}{{
		name: "MissingChunk", maxChunkBytes: 120, chunks: 2, reason: "MissingChunk",
		damage: func(s *scenario) {
			if err := admin.Kube.CoreV1().Secrets(inventoryNamespace).Delete(s.ctx(), s.chunkName(comp, 1), metav1.DeleteOptions{}); err != nil {
				s.t.Fatal(err)
			}
		},
	}, {
		name: "DigestMismatch", chunks: 1, reason: "DigestMismatch",
		damage: func(s *scenario) {
			secrets := admin.Kube.CoreV1().Secrets(inventoryNamespace)
			secret, err := secrets.Get(s.ctx(), s.chunkName(comp, 0), metav1.GetOptions{})
			if err != nil {
				s.t.Fatal(err)
			}
			secret.Data["inventory.json"] = []byte("[]")
			if _, err := secrets.Update(s.ctx(), secret, metav1.UpdateOptions{}); err != nil {
				s.t.Fatal(err)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachMode(t, func(t *testing.T, m mode) {
				s := newScenario(t, m, settings{recovery: true, maxChunkBytes: tc.maxChunkBytes})
				uids, recreatedAt, uid := s.recordThenRecreate(tc.chunks, func() { tc.damage(s) })

				first := s.waitFirstSynthesis(uid)
				d := s.waitDecision(uid, first, "InventoryInvalid")
				if d.Reason != tc.reason || d.Tombstones != 0 || d.TombstoneSlice != "" {
					t.Errorf("decision %+v, want InventoryInvalid/%s without tombstones", d, tc.reason)
				}
				s.waitReady(comp, "")
				s.holdsFor("nothing deleted after an invalid history", observeFor, func(ctx context.Context) error {
					for name, want := range uids {
						if got, err := s.configMapUID(ctx, name); err != nil || got != want {
							return fmt.Errorf("ConfigMap %s: uid %q (%v), want %q", name, got, err, want)
						}
					}
					if names, err := s.recoverySlices(ctx, comp); err != nil || len(names) > 0 {
						return fmt.Errorf("recovery slices %v (%v)", names, err)
					}
					if syn := s.history.currentSyntheses(uid); len(syn) != 1 {
						return fmt.Errorf("syntheses since the recreation %v, want 1", syn)
					}
					if n := len(s.syntheses(comp, recreatedAt)); n != 1 {
						return fmt.Errorf("%d executor runs since the recreation, want 1", n)
					}
					return nil
				})
			})
		})
	}
}

// TestHeldRecoveryWaitsForApproval: over the deletion guard nothing is handed to Eno until an
// operator approves; then Eno deletes the orphan.
func TestHeldRecoveryWaitsForApproval(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "0.1"})
		uids, _, uid := s.recordThenRecreate(1, nil)

		first := s.waitFirstSynthesis(uid)
		held := s.waitDecision(uid, first, "HeldForReview")
		if held.Tombstones != 1 {
			t.Errorf("decision %+v, want 1 tombstone held", held)
		}
		s.holdsFor("the orphan survives while held", observeFor, func(ctx context.Context) error {
			if got, err := s.configMapUID(ctx, "cm-b"); err != nil || got != uids["cm-b"] {
				return fmt.Errorf("ConfigMap cm-b: uid %q (%v), want %q", got, err, uids["cm-b"])
			}
			if names, err := s.recoverySlices(ctx, comp); err != nil || len(names) > 0 {
				return fmt.Errorf("recovery slices %v (%v)", names, err)
			}
			if syn := s.history.currentSyntheses(uid); len(syn) != 1 {
				return fmt.Errorf("syntheses %v while held, want only the first", syn)
			}
			return nil
		})

		s.annotate(comp, reviewAnnotation, "approve:"+first)
		d := s.waitDecision(uid, first, "Recovered")
		if d.Reason != "Approved" || d.Tombstones != 1 {
			t.Errorf("decision %+v, want Recovered/Approved with 1 tombstone", d)
		}
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})
	})
}

// TestMeasureRecovery (ENO_MEASURE=1) measures, over 5 runs per mode, the time from the
// recreated Composition's first synthesis (when the watch saw it become current) to the
// orphan's deletion (when a watch saw it go), and how many syntheses a recovery causes (goal:
// exactly one extra).
func TestMeasureRecovery(t *testing.T) {
	if os.Getenv(measureEnv) != "1" {
		t.Skipf("set %s=1 to measure", measureEnv)
	}
	const runs = 5
	forEachMode(t, func(t *testing.T, m mode) {
		var latencies []time.Duration
		var extras []int
		for i := range runs {
			t.Run(fmt.Sprint("run-", i), func(t *testing.T) {
				s := newScenario(t, m, settings{recovery: true})
				var orphanRV string
				_, _, uid := s.recordThenRecreate(1, func() {
					cm, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx(), "cm-b", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					orphanRV = cm.ResourceVersion
				})
				gone := s.watchDeleted("cm-b", orphanRV)
				first := s.waitFirstSynthesis(uid)
				s.waitDecision(uid, first, "Recovered")
				synthesized, ok := s.history.becameCurrent(uid, first)
				if !ok {
					t.Fatal("the first synthesis was never seen current")
				}
				latencies = append(latencies, gone.Sub(synthesized))
				last := s.waitReady(comp, first)
				s.requireStable(last.UUID, synthesized)
				extras = append(extras, len(s.history.currentSyntheses(uid))-1)
			})
		}
		if len(latencies) == 0 {
			return
		}
		sorted := slices.Clone(latencies)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		t.Logf("%s: first synthesis → orphan deleted by Eno: median %s over %d runs (all: %v); extra syntheses per recovery: %v",
			m.name, sorted[len(sorted)/2].Round(time.Millisecond), len(latencies), latencies, extras)
	})
}
