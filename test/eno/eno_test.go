//go:build eno

package eno

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// recordThenRecreate runs the first half of every recovery scenario: the Composition, opted
// in and set to orphan on deletion, deploys cm-a and cm-b; its snapshot of chunks chunks is
// recorded; it is deleted (both ConfigMaps survive); damage, when set, is done to the history;
// it is recreated under the same name, opted in, with synth-one. It returns the ConfigMaps'
// UIDs and when the recreation happened.
func (s *scenario) recordThenRecreate(chunks int, damage func()) (map[string]types.UID, time.Time) {
	s.t.Helper()
	created := s.createComposition(comp, "synth-two", map[string]string{
		optInAnnotation:            "enabled",
		deletionStrategyAnnotation: "orphan",
	})
	uids := s.waitConfigMaps("cm-a", "cm-b")
	syn := s.waitReady(comp, "")
	s.waitDecision(comp, syn.UUID, "NoInventory")
	s.waitRecorded(comp, created.GetUID(), syn.UUID, chunks)

	s.deleteComposition(comp)
	s.requireUnchanged(uids)
	if damage != nil {
		damage()
	}

	recreatedAt := time.Now()
	s.createComposition(comp, "synth-one", map[string]string{optInAnnotation: "enabled"})
	return uids, recreatedAt
}

// firstSynthesis returns the first synthesis the executor ran for the Composition since t.
func (s *scenario) firstSynthesis(since time.Time) string {
	s.t.Helper()
	uuids := s.syntheses(comp, since)
	if len(uuids) == 0 {
		s.t.Fatalf("no executor run for %s/%s since %s", s.ns, comp, since.Format(time.RFC3339))
	}
	return uuids[0]
}

// requireNotRecovered asserts a decision recovers nothing again (SPEC §6: one recovery per
// incarnation from one source; within one incarnation Eno's own diff owns cleanup).
func requireNotRecovered(t *testing.T, d decision) {
	t.Helper()
	if d.Outcome != "NothingToRecover" || (d.Reason != "AlreadyDecided" && d.Reason != "SameIncarnation") {
		t.Fatalf("decision %+v, want NothingToRecover with reason AlreadyDecided or SameIncarnation", d)
	}
}

// TestRecoveryDeletesOrphan is the end-to-end promise of SPEC §6.2/§10: after record → delete
// with orphan → recreate without cm-b, Eno deletes cm-b downstream and leaves cm-a untouched;
// a forced resynthesis afterwards recovers nothing again and does not loop.
func TestRecoveryDeletesOrphan(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		s := newScenario(t, m, settings{recovery: true})
		uids, recreatedAt := s.recordThenRecreate(1, nil)

		d := s.waitDecision(comp, "", "Recovered")
		if first := s.firstSynthesis(recreatedAt); d.SynthesisUUID != first {
			t.Errorf("Recovered decision for synthesis %s, want the recreated Composition's first synthesis %s", d.SynthesisUUID, first)
		}
		if d.Tombstones != 1 || d.TombstoneSlice == "" {
			t.Errorf("decision %+v, want 1 tombstone in a named slice", d)
		}
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})

		// The synthesis that carried the tombstone: decided without recovering again, then recorded.
		carried := s.waitReady(comp, d.SynthesisUUID)
		requireNotRecovered(t, s.waitDecision(comp, carried.UUID, "NothingToRecover"))
		u, err := s.getComposition(s.ctx(), comp)
		if err != nil {
			t.Fatal(err)
		}
		s.waitRecorded(comp, u.GetUID(), carried.UUID, 1)
		t.Logf("syntheses since the recreation, up to the recovery's: %v", s.syntheses(comp, recreatedAt))

		// (c) A forced resynthesis afterwards: one new synthesis, nothing recovered, no loop.
		s.annotate(comp, forceResynthesis, carried.UUID)
		forced := s.waitReady(comp, carried.UUID)
		requireNotRecovered(t, s.waitDecision(comp, forced.UUID, "NothingToRecover"))
		count := len(s.syntheses(comp, recreatedAt))
		s.holdsFor("no synthesis after the forced one", observeFor, func(ctx context.Context) error {
			u, err := s.getComposition(ctx, comp)
			if err != nil {
				return err
			}
			if syn := currentSynthesis(u); syn.UUID != forced.UUID || syn.InFlight != "" {
				return fmt.Errorf("synthesis moved on from %s: %+v", forced.UUID, syn)
			}
			if n := len(s.syntheses(comp, recreatedAt)); n != count {
				return fmt.Errorf("the executor ran %d more time(s)", n-count)
			}
			return nil
		})
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})
	})
}

// TestInvalidHistoryDeletesNothing: a history that §5 rejects makes no tombstones under real
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
				uids, recreatedAt := s.recordThenRecreate(tc.chunks, func() { tc.damage(s) })

				d := s.waitDecision(comp, "", "InventoryInvalid")
				if d.Reason != tc.reason || d.Tombstones != 0 || d.TombstoneSlice != "" {
					t.Errorf("decision %+v, want InventoryInvalid/%s without tombstones", d, tc.reason)
				}
				if first := s.firstSynthesis(recreatedAt); d.SynthesisUUID != first {
					t.Errorf("decision for synthesis %s, want the first synthesis %s", d.SynthesisUUID, first)
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
					if n := len(s.syntheses(comp, recreatedAt)); n != 1 {
						return fmt.Errorf("%d syntheses since the recreation, want 1", n)
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
		uids, recreatedAt := s.recordThenRecreate(1, nil)

		held := s.waitDecision(comp, "", "HeldForReview")
		if first := s.firstSynthesis(recreatedAt); held.SynthesisUUID != first || held.Tombstones != 1 {
			t.Errorf("decision %+v, want 1 tombstone held for the first synthesis %s", held, first)
		}
		s.holdsFor("the orphan survives while held", observeFor, func(ctx context.Context) error {
			if got, err := s.configMapUID(ctx, "cm-b"); err != nil || got != uids["cm-b"] {
				return fmt.Errorf("ConfigMap cm-b: uid %q (%v), want %q", got, err, uids["cm-b"])
			}
			if names, err := s.recoverySlices(ctx, comp); err != nil || len(names) > 0 {
				return fmt.Errorf("recovery slices %v (%v)", names, err)
			}
			return nil
		})

		s.annotate(comp, reviewAnnotation, "approve:"+held.SynthesisUUID)
		d := s.waitDecision(comp, held.SynthesisUUID, "Recovered")
		if d.Reason != "Approved" || d.Tombstones != 1 {
			t.Errorf("decision %+v, want Recovered/Approved with 1 tombstone", d)
		}
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})
	})
}

// TestMeasureRecovery (ENO_MEASURE=1) measures, over 5 runs per mode, the time from the
// recreated Composition's first synthesis (its executor's exit, right after it swapped the
// synthesis in) to the orphan's disappearance, and how many syntheses a recovery causes
// (goal: exactly one extra).
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
				_, recreatedAt := s.recordThenRecreate(1, nil)
				s.waitDecision(comp, "", "Recovered")
				gone := s.waitConfigMapGone("cm-b")
				executed := standIn.runsFor(s.ns, comp, recreatedAt)
				if len(executed) == 0 {
					t.Fatal("no executor run after the recreation")
				}
				latencies = append(latencies, gone.Sub(executed[0].Finished))
				last := s.waitReady(comp, s.firstSynthesis(recreatedAt))
				s.holdsFor("no further synthesis", 10*time.Second, func(ctx context.Context) error {
					u, err := s.getComposition(ctx, comp)
					if err != nil {
						return err
					}
					if syn := currentSynthesis(u); syn.UUID != last.UUID || syn.InFlight != "" {
						return fmt.Errorf("synthesis moved on from %s", last.UUID)
					}
					return nil
				})
				extras = append(extras, len(s.syntheses(comp, recreatedAt))-1)
			})
		}
		if len(latencies) == 0 {
			return
		}
		sorted := slices.Clone(latencies)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		t.Logf("%s: first synthesis → orphan deleted by Eno: median %s over %d runs (all: %v); extra syntheses per recovery: %v",
			m.name, sorted[len(sorted)/2].Round(10*time.Millisecond), len(latencies), latencies, extras)
	})
}
