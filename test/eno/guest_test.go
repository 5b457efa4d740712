//go:build eno

package eno

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/runnable"
)

// The guest rules of the recovery controller inside eno-reconciler (design §8.2): it follows the
// host's leader, and a panic of its own never takes the host down.

// The fault injection variables of the tombstonerecovery_faults build (app/fault_injection.go).
const (
	faultPanicEnv = "ENO_TOMBSTONE_RECOVERY_FAULT_PANIC"
	faultCrashEnv = "ENO_TOMBSTONE_RECOVERY_FAULT_CRASH"
)

// recoveryLogger is the name eno-wire.sh gives the controller's logger inside eno-reconciler.
const recoveryLogger = `"logger":"tombstone-recovery`

// TestTwoReplicasRecoverOnce runs two wired eno-reconciler replicas of one shard, both ways the
// host can run them: electing a leader (--leader-election, as Eno deploys it: the controller
// follows the host's leader and takes no Lease) and not (every replica runs everything, and the
// controller elects its own leader with a Lease). Exactly one replica runs the recovery; it is
// killed (SIGKILL: no cleanup, no Lease released) right after the hand-off's commit point, and the
// other replica, once it leads, finishes the hand-off: Eno deletes the orphan and nothing else.
func TestTwoReplicasRecoverOnce(t *testing.T) {
	for _, hostElects := range []bool{true, false} {
		name := map[bool]string{true: "host elects", false: "own lease"}[hostElects]
		t.Run(name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "crashed")
			s := newScenario(t, mode{name: "wired", wired: true}, settings{
				recovery:   true,
				replicas:   2,
				hostElects: hostElects,
				faults:     func(string) []string { return []string{faultCrashEnv + "=committed:" + marker} },
			})
			for _, r := range s.replicas {
				r.mayDie = func(pid int) bool { return strings.HasPrefix(readFile(marker), fmt.Sprintf("pid %d ", pid)) }
			}
			uids, _, uid := s.recordThenRecreate(1, nil)
			first := s.waitFirstSynthesis(uid)

			var crashed, survivor *process
			s.waitFor("a replica crashed at the commit point", waitLong, func(context.Context) error {
				for i, r := range s.replicas {
					if r.exited() && r.mayDie(r.pid()) {
						crashed, survivor = r, s.replicas[1-i]
						return nil
					}
				}
				return fmt.Errorf("no crash yet (marker: %q)", readFile(marker))
			})
			// Until the crash, only the leader ran the recovery controller: the survivor takes over
			// only once the crashed replica's Lease has expired, seconds later.
			before := survivor.log()
			if hostElects {
				if strings.Contains(before, recoveryLogger) {
					t.Errorf("the follower %s ran the recovery controller while the leader lived:\n%s", survivor.name, linesWith(before, recoveryLogger, 10))
				}
			} else if strings.Contains(before, `"msg":"became leader"`) {
				t.Errorf("both replicas led the recovery controller: %s too:\n%s", survivor.name, linesWith(before, "became leader", 5))
			}
			if !strings.Contains(crashed.log(), "injected fault: crashing") {
				t.Errorf("%s crashed, but not at the injected fault", crashed.name)
			}
			t.Logf("%s (pid %d) crashed after the commit point; %s (pid %d) takes over", crashed.name, crashed.pid(), survivor.name, survivor.pid())

			d := s.waitDecision(uid, first, "Recovered")
			if d.Tombstones != 1 {
				t.Errorf("decision %+v, want 1 tombstone", d)
			}
			s.waitConfigMapGone("cm-b")
			s.requireDeletedByEno("cm-b")
			s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"]})
			carried := s.waitReady(comp, first)
			requireNotRecovered(t, s.waitDecision(uid, carried.UUID, "NothingToRecover"))
			s.waitRecorded(comp, uid, carried.UUID, 1)
			if !strings.Contains(survivor.log(), recoveryLogger) {
				t.Errorf("%s never ran the recovery controller, yet the hand-off finished", survivor.name)
			}
			s.requireOwnLeases(!hostElects)
		})
	}
}

// requireOwnLeases checks the recovery controller's own Lease for the scenario's shard: held
// when the controller elects its own leader, absent when it follows the host's.
func (s *scenario) requireOwnLeases(want bool) {
	s.t.Helper()
	leases, err := admin.Kube.CoordinationV1().Leases(metav1.NamespaceAll).List(s.ctx(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	var ours []string
	for _, l := range leases.Items {
		// eno-wire.sh passes Eno's selector, which selects everything by default.
		if l.Name == runnable.DefaultLeaseName(s.ns, nil) {
			ours = append(ours, l.Namespace+"/"+l.Name)
		}
	}
	switch {
	case want && len(ours) != 1:
		s.t.Errorf("the recovery controller's own Lease for %s: %v, want exactly one", s.ns, ours)
	case !want && len(ours) != 0:
		s.t.Errorf("the recovery controller took a Lease of its own (%v) although eno-reconciler elects the leader", ours)
	}
}

// TestPanickingRecoveryLeavesEnoReconciling runs a wired eno-reconciler whose recovery of one
// Composition panics every time (the fault injection build). The panic is recovered, logged and
// retried with backoff; the process keeps running, Eno keeps reconciling every Composition, that
// one included, and the recovery controller keeps serving the others.
func TestPanickingRecoveryLeavesEnoReconciling(t *testing.T) {
	s := newScenario(t, mode{name: "wired", wired: true}, settings{
		recovery: true,
		faults:   func(ns string) []string { return []string{faultPanicEnv + "=" + ns + "/" + comp} },
	})
	s.recoveredPanics = true
	other := s.createOwnSynthesizer("other", nil, emitted{name: "cm-other"})
	later := s.createOwnSynthesizer("later", nil, emitted{name: "cm-later"})

	s.createComposition(comp, "synth-two", map[string]string{optInAnnotation: "enabled"})
	otherComp := s.createComposition("other", other, map[string]string{optInAnnotation: "enabled"})
	s.waitConfigMaps("cm-a", "cm-b", "cm-other")
	s.waitReady(comp, "")
	syn := s.waitReady("other", "")
	s.waitDecision(otherComp.GetUID(), syn.UUID, "NoInventory")
	s.waitRecorded("other", otherComp.GetUID(), syn.UUID, 1)

	s.waitFor("the panic of "+comp+"'s recovery recovered and retried", waitLong, func(context.Context) error {
		if n := strings.Count(s.reconciler.log(), recoveredPanicMessage); n < 3 {
			return fmt.Errorf("%d recovered panics logged so far", n)
		}
		return nil
	})
	// After the panics, Eno still reconciles a Composition created now, and the controller
	// still records it.
	laterComp := s.createComposition("later", later, map[string]string{optInAnnotation: "enabled"})
	s.waitConfigMaps("cm-later")
	syn = s.waitReady("later", "")
	s.waitDecision(laterComp.GetUID(), syn.UUID, "NoInventory")
	u, err := s.getComposition(s.ctx(), comp)
	if err != nil {
		t.Fatal(err)
	}
	if raw, ok := u.GetAnnotations()[decisionAnnotation]; ok {
		t.Errorf("the Composition whose recovery panics has a decision: %s", raw)
	}
	log := s.reconciler.log()
	if !strings.Contains(linesWith(log, recoveredPanicMessage, 1), "injected fault") {
		t.Errorf("the recovered panic is not the injected one:\n%s", linesWith(log, recoveredPanicMessage, 1))
	}
	if !strings.Contains(linesWith(log, recoveredPanicMessage, 1), `"stack":"`) {
		t.Errorf("the recovered panic is logged without its stack:\n%s", linesWith(log, recoveredPanicMessage, 1))
	}
}

// TestFaultInjectionIsNotInTheDefaultBuild: the variables that inject faults exist in the
// acceptance tests' build of the wired eno-reconciler only, never in the default one.
func TestFaultInjectionIsNotInTheDefaultBuild(t *testing.T) {
	if bins.wired == "" || bins.wiredFaults == "" {
		t.Fatalf("the wired builds are missing (%q, %q): run make test-eno", bins.wired, bins.wiredFaults)
	}
	for _, c := range []struct {
		binary string
		want   bool
	}{{bins.wired, false}, {bins.wiredFaults, true}, {bins.recovery, false}} {
		data, err := os.ReadFile(c.binary)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{faultPanicEnv, faultCrashEnv} {
			if got := strings.Contains(string(data), v); got != c.want {
				t.Errorf("%s mentions %s: %v, want %v", c.binary, v, got, c.want)
			}
		}
	}
}

// linesWith returns up to max lines of log that contain substr.
func linesWith(log, substr string, max int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
			if len(out) == max {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
