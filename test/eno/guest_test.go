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

// TestTwoReplicasRecoverOnce runs two wired eno-reconciler replicas of one shard electing a
// leader (--leader-election, as Eno deploys it): the controller runs on the host's leader only
// and takes no Lease of its own. The leader runs the recovery; it is killed (SIGKILL: no
// cleanup, no Lease released) right after the hand-off's commit point, and the other replica,
// once it leads, finishes the hand-off: Eno deletes the orphan and nothing else.
func TestTwoReplicasRecoverOnce(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "crashed")
	s := newScenario(t, mode{name: "wired", wired: true}, settings{
		recovery:   true,
		replicas:   2,
		hostElects: true,
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
	if before := survivor.log(); strings.Contains(before, recoveryLogger) {
		t.Errorf("the follower %s ran the recovery controller while the leader lived:\n%s", survivor.name, linesWith(before, recoveryLogger, 10))
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
	s.requireNoOwnLease()
}

// requireNoOwnLease checks that the recovery controller took no Lease of its own for the
// scenario's shard: it follows eno-reconciler's.
func (s *scenario) requireNoOwnLease() {
	s.t.Helper()
	leases, err := admin.Kube.CoordinationV1().Leases(metav1.NamespaceAll).List(s.ctx(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, l := range leases.Items {
		// eno-wire.sh passes Eno's selector, which selects everything by default.
		if l.Name == runnable.DefaultLeaseName(s.ns, nil) {
			s.t.Errorf("the recovery controller took a Lease of its own (%s/%s) although eno-reconciler elects the leader", l.Namespace, l.Name)
		}
	}
}

// TestWithoutLeaderElectionTheGuestRefuses runs a wired eno-reconciler without
// --leader-election: the recovery controller logs that it needs the flag and starts nothing,
// and Eno reconciles as usual.
func TestWithoutLeaderElectionTheGuestRefuses(t *testing.T) {
	s := newScenario(t, mode{name: "wired", wired: true}, settings{recovery: true, noElection: true})
	synth := s.createOwnSynthesizer("plain", nil, emitted{name: "cm-plain"})
	created := s.createComposition("plain", synth, map[string]string{optInAnnotation: "enabled"})
	s.waitConfigMaps("cm-plain")
	s.waitReady("plain", "")
	log := s.reconciler.log()
	if !strings.Contains(log, "not starting the tombstone recovery controller") || !strings.Contains(log, "--leader-election") {
		t.Errorf("the refusal naming --leader-election is not logged:\n%s", linesWith(log, recoveryLogger, 5))
	}
	u, err := s.getComposition(s.ctx(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	if raw, ok := u.GetAnnotations()[decisionAnnotation]; ok {
		t.Errorf("composition %s has a decision although the controller refused to start: %s", created.GetUID(), raw)
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
