//go:build eno

package eno

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// The annotations and names of design §3 and design §6, and Eno's own annotations (design §6.2).
const (
	optInAnnotation            = "eno.azure.io/tombstone-recovery"
	decisionAnnotation         = "eno.azure.io/tombstone-recovery-decision"
	reviewAnnotation           = "eno.azure.io/tombstone-recovery-review"
	deletionStrategyAnnotation = "eno.azure.io/deletion-strategy"
	forceResynthesis           = "eno.azure.io/force-resynthesis"
	inventoryNamespace         = "kube-system"
	sourceSynthesisAnnotation  = "eno.azure.io/source-synthesis-uuid"
	compositionUIDAnnotation   = "eno.azure.io/composition-uid"
	chunkCountAnnotation       = "eno.azure.io/inventory-chunk-count"
)

const (
	// waitLong bounds every wait for Eno or the controller: a synthesis, a reconcile, a
	// deletion. Generous for two busy cores.
	waitLong  = 3 * time.Minute
	pollEvery = 250 * time.Millisecond
	// observeFor is how long a scenario watches that something does NOT happen (a deletion, a
	// further synthesis). A bounded observation, never an assertion of speed.
	observeFor = 20 * time.Second
	// logLag bounds how long a process's log line may trail what it did.
	logLag = 10 * time.Second
)

// mode is how the recovery controller runs next to Eno.
type mode struct {
	name  string
	wired bool // inside eno-reconciler (hack/eno-wire.sh) instead of the standalone binary
}

var modes = []mode{{name: "standalone"}, {name: "wired", wired: true}}

// forEachMode runs f once per mode as a subtest.
func forEachMode(t *testing.T, f func(t *testing.T, m mode)) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// settings configure the recovery controller of one scenario.
type settings struct {
	// recovery runs the recovery controller (standalone: the binary; wired: always inside).
	recovery bool
	// maxChunkBytes and maxTombstoneFraction override the defaults when set.
	maxChunkBytes        int
	maxTombstoneFraction string
	// pendingRecheckInterval overrides how often a pending hand-off is checked again (default
	// 1m) when set.
	pendingRecheckInterval time.Duration
	// replicas is how many eno-reconciler replicas of the scenario's shard run (0 is 1).
	replicas int
	// hostElects runs eno-reconciler with --leader-election (a short Lease in the scenario's
	// namespace), as Eno's own deployment does. The wired mode always does, unless noElection:
	// the recovery controller refuses to start without it (design §8.2).
	hostElects bool
	// noElection runs the wired eno-reconciler without --leader-election.
	noElection bool
	// faults, when set, runs the wired eno-reconciler built with fault injection
	// (eno-reconciler-wired-faults) with the ENO_TOMBSTONE_RECOVERY_FAULT_* variables it returns
	// for the scenario's namespace.
	faults func(namespace string) []string
}

// scenario is one namespace with its own eno-reconciler and, in the standalone mode, its own
// tombstone-recovery, both limited to that namespace.
type scenario struct {
	t          *testing.T
	mode       mode
	ns         string
	dir        string     // the scenario's logs, scripts and gate files
	reconciler *process   // the first replica
	replicas   []*process // every eno-reconciler replica, the first included
	// reconcilerStart starts the first eno-reconciler replica again, as it was started first.
	reconcilerStart func() (*process, error)
	// recoveredPanics allows the log line of a panic that the recovery controller recovered.
	recoveredPanics bool
	recovery        *process // standalone only
	procs           []*process
	history         *history
	// controllerLogFrom is where eno-controller's log stood when the scenario began.
	controllerLogFrom int64
}

func newScenario(t *testing.T, m mode, st settings) *scenario {
	t.Helper()
	if m.wired && st.faults != nil && bins.wiredFaults == "" {
		t.Fatalf("no wired eno-reconciler with fault injection: %s/bin/eno-reconciler-wired-faults was not built (hack/eno-build.sh)", os.Getenv(enoDirEnv))
	}
	if m.wired && bins.wired == "" {
		t.Fatalf("no wired eno-reconciler: hack/eno-wire.sh was not found when hack/eno-build.sh ran, so %s/bin/eno-reconciler-wired was not built", os.Getenv(enoDirEnv))
	}
	s := &scenario{t: t, mode: m, controllerLogFrom: enoController.logSize()}
	s.ns = admin.NewNamespace(t, "eno")
	s.dir = t.TempDir()
	dir := s.dir
	s.history = watchHistory(s.ns)
	t.Cleanup(s.finish)

	reconcilerBin := bins.reconciler
	args := []string{"--metrics-addr=0", "--health-probe-addr=0", "--composition-namespace=" + s.ns}
	if st.hostElects || (m.wired && !st.noElection) {
		// Eno's flags; a short Lease so that a successor takes over within seconds.
		args = append(args, "--leader-election", "--leader-election-namespace="+s.ns, "--leader-election-id=eno-reconciler",
			"--leader-election-lease-duration=8s", "--leader-election-lease-renew-deadline=6s", "--leader-election-lease-retry=1s")
	}
	var extraEnv []string
	kubeconfig := adminKubeconfig
	if m.wired {
		reconcilerBin, kubeconfig = bins.wired, enoKubeconfig
		extraEnv = wiredSettings(st)
		if st.faults != nil {
			reconcilerBin = bins.wiredFaults
			extraEnv = append(extraEnv, st.faults(s.ns)...)
		}
	} else if st.faults != nil {
		t.Fatal("faults are injected into the wired eno-reconciler only")
	}
	startReplica := func(i int) (*process, error) {
		name := "eno-reconciler"
		if st.replicas > 1 {
			name = fmt.Sprintf("eno-reconciler-%d", i)
		}
		return startProcess(name, reconcilerBin, args,
			append(extraEnv, "KUBECONFIG="+kubeconfig), filepath.Join(dir, name+".log"))
	}
	s.reconcilerStart = func() (*process, error) { return startReplica(0) }
	for i := range max(st.replicas, 1) {
		p, err := startReplica(i)
		if err != nil {
			t.Fatal(err)
		}
		s.replicas = append(s.replicas, p)
		s.procs = append(s.procs, p)
	}
	s.reconciler = s.replicas[0]
	var err error

	if !m.wired && st.recovery {
		args := []string{"run",
			"--kubeconfig=" + adminKubeconfig,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=0",
			"--composition-namespace=" + s.ns,
		}
		if st.maxChunkBytes > 0 {
			args = append(args, "--max-chunk-bytes="+strconv.Itoa(st.maxChunkBytes))
		}
		if st.maxTombstoneFraction != "" {
			args = append(args, "--max-tombstone-fraction="+st.maxTombstoneFraction)
		}
		if st.pendingRecheckInterval > 0 {
			args = append(args, "--pending-recheck-interval="+st.pendingRecheckInterval.String())
		}
		s.recovery, err = startProcess("tombstone-recovery", bins.recovery, args, nil, filepath.Join(dir, "tombstone-recovery.log"))
		if err != nil {
			t.Fatal(err)
		}
		s.procs = append(s.procs, s.recovery)
	}
	t.Logf("scenario in namespace %s (%s): eno-reconciler pid %d%s", s.ns, m.name, s.reconciler.pid(), s.recoveryPID())
	return s
}

func (s *scenario) recoveryPID() string {
	if s.recovery == nil {
		return ""
	}
	return fmt.Sprintf(", tombstone-recovery pid %d", s.recovery.pid())
}

// restartReconciler stops eno-reconciler by its PID and starts it again with the same
// arguments; the new process appends to the same log.
func (s *scenario) restartReconciler() {
	s.t.Helper()
	if err := s.reconciler.stop(); err != nil {
		s.t.Logf("stopping eno-reconciler (pid %d): %v", s.reconciler.pid(), err)
	}
	p, err := s.reconcilerStart()
	if err != nil {
		s.t.Fatal(err)
	}
	for i := range s.procs {
		if s.procs[i] == s.reconciler {
			s.procs[i] = p
		}
	}
	s.replicas[0] = p
	s.t.Logf("eno-reconciler restarted: pid %d", p.pid())
	s.reconciler = p
}

// wiredSettings maps settings onto the wired eno-reconciler's environment: the
// ENO_TOMBSTONE_RECOVERY_* variables that hack/eno-wire.sh's call reads (runnable.Options.Getenv).
func wiredSettings(st settings) (extraEnv []string) {
	if st.maxChunkBytes > 0 {
		extraEnv = append(extraEnv, "ENO_TOMBSTONE_RECOVERY_MAX_CHUNK_BYTES="+strconv.Itoa(st.maxChunkBytes))
	}
	if st.maxTombstoneFraction != "" {
		extraEnv = append(extraEnv, "ENO_TOMBSTONE_RECOVERY_MAX_TOMBSTONE_FRACTION="+st.maxTombstoneFraction)
	}
	if st.pendingRecheckInterval > 0 {
		extraEnv = append(extraEnv, "ENO_TOMBSTONE_RECOVERY_PENDING_RECHECK_INTERVAL="+st.pendingRecheckInterval.String())
	}
	return extraEnv
}

// finish stops the scenario's processes by PID and checks every log of the scenario for a
// panic: eno-controller's since the scenario began, eno-reconciler's, tombstone-recovery's
// and the executors' for this namespace (design §10: Eno never panics).
func (s *scenario) finish() {
	t := s.t
	for _, p := range s.procs {
		err := p.stop()
		// The standalone binary promises exit 0 on SIGTERM after draining (design §9).
		if p == s.recovery && err != nil {
			t.Errorf("tombstone-recovery (pid %d) did not exit 0 on SIGTERM: %v", p.pid(), err)
		}
	}
	s.history.stop()
	logs := map[string]string{"eno-controller": enoController.logSince(s.controllerLogFrom)}
	for _, p := range s.procs {
		logs[p.name] = p.log()
	}
	for _, run := range standIn.runsIn(s.ns) {
		if run.LogPath != "" {
			logs["executor "+run.Pod] = readFile(run.LogPath)
		}
	}
	for name, log := range logs {
		if lines := panicLines(log, 10, s.recoveredPanics); len(lines) > 0 {
			t.Errorf("%s logged a panic:\n%s", name, strings.Join(lines, "\n"))
		}
	}
	if t.Failed() || os.Getenv(showLogsEnv) != "" {
		s.printLogs()
	}
}

// printLogs prints the tails of the scenario's logs.
func (s *scenario) printLogs() {
	t := s.t
	t.Logf("--- eno-controller (pid %d) during the scenario, last 80 lines ---\n%s", enoController.pid(), tailLines(enoController.logSince(s.controllerLogFrom), 80))
	for _, p := range s.procs {
		t.Logf("--- %s (pid %d, %v), last 80 lines ---\n%s", p.name, p.pid(), p.waitErr, p.tail(80))
	}
	for _, run := range standIn.runsIn(s.ns) {
		t.Logf("--- executor for %s/%s synthesis %s (pod %s): %v, last 15 lines ---\n%s",
			run.CompositionNamespace, run.CompositionName, run.SynthesisUUID, run.Pod, run.Err, tailLines(readFile(run.LogPath), 15))
	}
	for _, err := range s.history.problems() {
		t.Logf("composition watch: %v", err)
	}
	for _, o := range s.history.obs {
		t.Logf("%s %s (uid %s): current synthesis %s ready=%v inFlight=%q; decision %s",
			o.At.Format("15:04:05.000"), o.Name, o.UID, o.Synthesis.UUID, o.Synthesis.Ready, o.Synthesis.InFlight, o.RawDec)
	}
	if comps, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, c := range comps.Items {
			meta, _ := json.Marshal(map[string]any{"annotations": c.GetAnnotations(), "uid": c.GetUID(), "finalizers": c.GetFinalizers()})
			status, _ := json.Marshal(c.Object["status"])
			t.Logf("--- Composition %s/%s ---\nmetadata: %s\nstatus: %s", s.ns, c.GetName(), meta, status)
		}
	}
	if slices, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, sl := range slices.Items {
			spec, _ := json.Marshal(sl.Object["spec"])
			t.Logf("--- ResourceSlice %s/%s (owners %d, finalizers %v, deleting %v) ---\n%s", s.ns, sl.GetName(), len(sl.GetOwnerReferences()), sl.GetFinalizers(), sl.GetDeletionTimestamp() != nil, spec)
		}
	}
}

// checkProcesses fails the test at once if a process of the scenario, or eno-controller, died.
func (s *scenario) checkProcesses() {
	s.t.Helper()
	for _, p := range append([]*process{enoController}, s.procs...) {
		if err := p.unexpectedExit(); err != nil {
			s.t.Fatal(err)
		}
	}
}

// waitFor polls check until it returns nil, failing the test with the last error after
// timeout, or at once if a process died.
func (s *scenario) waitFor(what string, timeout time.Duration, check func(ctx context.Context) error) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.checkProcesses()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within %s; last: %v", what, timeout, err)
		}
		time.Sleep(pollEvery)
	}
}

// holdsFor polls check for d and fails the test as soon as it returns an error: something
// that must not happen for a while.
func (s *scenario) holdsFor(what string, d time.Duration, check func(ctx context.Context) error) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.checkProcesses()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			s.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(pollEvery)
	}
}

func (s *scenario) ctx() context.Context { return kubetest.Context(s.t, time.Minute) }

// --- Compositions ---

// createComposition creates a Composition synthesized by synth.
func (s *scenario) createComposition(name, synth string, annotations map[string]string) *unstructured.Unstructured {
	s.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "Composition",
		"metadata":   map[string]any{"name": name, "namespace": s.ns},
		"spec":       map[string]any{"synthesizer": map[string]any{"name": synth}},
	}}
	if len(annotations) > 0 {
		u.SetAnnotations(annotations)
	}
	created, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Create(s.ctx(), u, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("creating Composition %s/%s: %v", s.ns, name, err)
	}
	return created
}

func (s *scenario) getComposition(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	return admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Get(ctx, name, metav1.GetOptions{})
}

// synthesis is what the scenarios read of status.currentSynthesis and inFlightSynthesis.
type synthesis struct {
	UUID        string
	Synthesized bool
	Ready       bool
	Slices      []string
	InFlight    string // UUID of the in-flight synthesis, "" when none
}

func currentSynthesis(u *unstructured.Unstructured) synthesis {
	var syn synthesis
	syn.UUID, _, _ = unstructured.NestedString(u.Object, "status", "currentSynthesis", "uuid")
	_, syn.Synthesized, _ = unstructured.NestedString(u.Object, "status", "currentSynthesis", "synthesized")
	_, syn.Ready, _ = unstructured.NestedString(u.Object, "status", "currentSynthesis", "ready")
	refs, _, _ := unstructured.NestedSlice(u.Object, "status", "currentSynthesis", "resourceSlices")
	for _, r := range refs {
		if m, ok := r.(map[string]any); ok {
			name, _ := m["name"].(string)
			syn.Slices = append(syn.Slices, name)
		}
	}
	syn.InFlight, _, _ = unstructured.NestedString(u.Object, "status", "inFlightSynthesis", "uuid")
	return syn
}

// waitReady waits until the Composition's current synthesis is Ready with nothing in flight,
// and, unless after is "", is another synthesis than after. It returns the synthesis.
func (s *scenario) waitReady(name, after string) synthesis {
	s.t.Helper()
	var syn synthesis
	s.waitFor(fmt.Sprintf("Composition %s/%s ready on a synthesis other than %q", s.ns, name, after), waitLong, func(ctx context.Context) error {
		u, err := s.getComposition(ctx, name)
		if err != nil {
			return err
		}
		syn = currentSynthesis(u)
		switch {
		case syn.UUID == "" || !syn.Synthesized:
			return fmt.Errorf("not synthesized yet: %+v", syn)
		case after != "" && syn.UUID == after:
			return fmt.Errorf("still on synthesis %s", after)
		case syn.InFlight != "":
			return fmt.Errorf("synthesis %s in flight", syn.InFlight)
		case !syn.Ready:
			return fmt.Errorf("synthesis %s not ready", syn.UUID)
		}
		return nil
	})
	return syn
}

// decision is the recovery decision annotation (design §6).
type decision struct {
	SynthesisUUID       string `json:"synthesisUUID"`
	Outcome             string `json:"outcome"`
	Reason              string `json:"reason"`
	Message             string `json:"message"`
	SourceSynthesisUUID string `json:"sourceSynthesisUUID"`
	Tombstones          int    `json:"tombstones"`
	TombstoneSlice      string `json:"tombstoneSlice"`
	RecoveredFrom       string `json:"recoveredFrom"`
}

func readDecision(u *unstructured.Unstructured) (decision, bool, error) {
	raw, ok := u.GetAnnotations()[decisionAnnotation]
	if !ok {
		return decision{}, false, nil
	}
	var d decision
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return decision{}, true, fmt.Errorf("decision annotation %q: %w", raw, err)
	}
	return d, true, nil
}

// waitDecision waits until the incarnation uid has been given a decision for synthesisUUID
// whose outcome is one of outcomes, and returns it. Decisions are read from the watch history,
// so one that was replaced quickly is still found. A finished decision with another outcome for
// that synthesis fails at once (HeldForReview is not finished: a review may follow).
func (s *scenario) waitDecision(uid types.UID, synthesisUUID string, outcomes ...string) decision {
	s.t.Helper()
	var found decision
	var terminal error
	s.waitFor(fmt.Sprintf("decision %v for %s/%s synthesis %s", outcomes, s.ns, comp, synthesisUUID), waitLong, func(ctx context.Context) error {
		var seen []decision
		for _, d := range s.history.decisions(uid) {
			if d.SynthesisUUID != synthesisUUID {
				continue
			}
			if slices.Contains(outcomes, d.Outcome) {
				found = d
				return nil
			}
			if d.Outcome != "HeldForReview" {
				terminal = fmt.Errorf("decision %+v for synthesis %s, want outcome %v", d, synthesisUUID, outcomes)
				return nil
			}
			seen = append(seen, d)
		}
		return fmt.Errorf("decisions so far for this synthesis: %+v; for the incarnation: %+v", seen, s.history.decisions(uid))
	})
	if terminal != nil {
		s.t.Fatal(terminal)
	}
	return found
}

// waitFirstSynthesis waits until the incarnation uid has a current synthesis and returns the
// first one it had.
func (s *scenario) waitFirstSynthesis(uid types.UID) string {
	s.t.Helper()
	var first string
	s.waitFor(fmt.Sprintf("first synthesis of %s/%s (uid %s)", s.ns, comp, uid), waitLong, func(context.Context) error {
		if syn := s.history.currentSyntheses(uid); len(syn) > 0 {
			first = syn[0]
			return nil
		}
		return fmt.Errorf("no synthesis yet")
	})
	return first
}

// setSynthesizer points the Composition at another Synthesizer (a spec change: Eno
// resynthesizes at once).
func (s *scenario) setSynthesizer(name, synth string) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := s.getComposition(s.ctx(), name)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, synth, "spec", "synthesizer", "name"); err != nil {
			return err
		}
		_, err = admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Update(s.ctx(), u, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		s.t.Fatalf("pointing Composition %s/%s at %s: %v", s.ns, name, synth, err)
	}
}

// annotate sets one annotation on the Composition with a merge patch.
func (s *scenario) annotate(name, key, value string) {
	s.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if _, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Patch(s.ctx(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatalf("annotating Composition %s/%s with %s=%s: %v", s.ns, name, key, value, err)
	}
}

// deleteComposition deletes the Composition and waits until Eno has let it go (its cleanup
// finalizer removed once the deletion is reconciled).
func (s *scenario) deleteComposition(name string) {
	s.t.Helper()
	if err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(s.ns).Delete(s.ctx(), name, metav1.DeleteOptions{}); err != nil {
		s.t.Fatalf("deleting Composition %s/%s: %v", s.ns, name, err)
	}
	s.waitFor(fmt.Sprintf("Composition %s/%s gone", s.ns, name), waitLong, func(ctx context.Context) error {
		u, err := s.getComposition(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (finalizers %v, status %v)", u.GetFinalizers(), u.Object["status"])
	})
}

// --- downstream objects ---

// configMapUID returns the UID of a ConfigMap of the scenario's namespace, "" if it is absent.
func (s *scenario) configMapUID(ctx context.Context, name string) (types.UID, error) {
	cm, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if cm.DeletionTimestamp != nil {
		return "", nil
	}
	return cm.UID, nil
}

// waitConfigMaps waits until each named ConfigMap exists and returns their UIDs.
func (s *scenario) waitConfigMaps(names ...string) map[string]types.UID {
	s.t.Helper()
	uids := map[string]types.UID{}
	for _, name := range names {
		s.waitFor(fmt.Sprintf("ConfigMap %s/%s deployed by Eno", s.ns, name), waitLong, func(ctx context.Context) error {
			uid, err := s.configMapUID(ctx, name)
			if err == nil && uid == "" {
				err = fmt.Errorf("not found")
			}
			uids[name] = uid
			return err
		})
	}
	return uids
}

// waitConfigMapGone waits until Eno has deleted the ConfigMap.
func (s *scenario) waitConfigMapGone(name string) time.Time {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("ConfigMap %s/%s deleted", s.ns, name), waitLong, func(ctx context.Context) error {
		uid, err := s.configMapUID(ctx, name)
		if err == nil && uid != "" {
			err = fmt.Errorf("still there (uid %s)", uid)
		}
		return err
	})
	return time.Now()
}

// requireUnchanged asserts that each ConfigMap still exists with the same UID.
func (s *scenario) requireUnchanged(uids map[string]types.UID) {
	s.t.Helper()
	for name, want := range uids {
		got, err := s.configMapUID(s.ctx(), name)
		if err != nil {
			s.t.Fatal(err)
		}
		if got != want {
			s.t.Fatalf("ConfigMap %s/%s: uid %q, want %q (untouched)", s.ns, name, got, want)
		}
	}
}

// requireDeletedByEno asserts that eno-reconciler's log records deleting the ConfigMap. Eno
// logs the line once its delete call has returned, so it may land just after a poll saw the
// ConfigMap gone: the line is waited for, up to logLag.
func (s *scenario) requireDeletedByEno(name string) {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("eno-reconciler's log records deleting ConfigMap %s/%s", s.ns, name), logLag, func(context.Context) error {
		if !s.deletedByEno(name) {
			return fmt.Errorf("no \"deleted resource\" line")
		}
		return nil
	})
}

// requireNotDeletedByEno asserts that eno-reconciler's log, over every restart, records no
// deletion of the ConfigMap.
func (s *scenario) requireNotDeletedByEno(name string) {
	s.t.Helper()
	if s.deletedByEno(name) {
		s.t.Fatalf("eno-reconciler's log has a \"deleted resource\" line for ConfigMap %s/%s", s.ns, name)
	}
}

func (s *scenario) deletedByEno(name string) bool {
	for _, r := range s.replicas {
		for _, line := range strings.Split(r.log(), "\n") {
			if strings.Contains(line, `"msg":"deleted resource"`) && strings.Contains(line, `"resourceName":"`+name+`"`) &&
				strings.Contains(line, `"resourceNamespace":"`+s.ns+`"`) {
				return true
			}
		}
	}
	return false
}

// --- inventory ---

// lineage is the default lineage of design §3: 12 hex characters of sha256("<namespace>/<name>").
func lineage(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:])[:12]
}

// chunkName is the inventory Secret of one chunk (no cut needed for these short names).
func (s *scenario) chunkName(comp string, index int) string {
	return fmt.Sprintf("%s-%s-%d", comp, lineage(s.ns, comp), index)
}

// waitRecorded waits until the snapshot of the Composition's synthesis is in kube-system:
// chunk 0 recorded from that Composition UID and synthesis, with chunks chunks in all.
func (s *scenario) waitRecorded(comp string, uid types.UID, synthesisUUID string, chunks int) {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("inventory of %s/%s synthesis %s recorded", s.ns, comp, synthesisUUID), waitLong, func(ctx context.Context) error {
		for i := 0; i < chunks; i++ {
			secret, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).Get(ctx, s.chunkName(comp, i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			a := secret.Annotations
			if a[sourceSynthesisAnnotation] != synthesisUUID || a[compositionUIDAnnotation] != string(uid) || a[chunkCountAnnotation] != strconv.Itoa(chunks) {
				return fmt.Errorf("Secret %s has %s=%q, %s=%q, %s=%q", secret.Name,
					sourceSynthesisAnnotation, a[sourceSynthesisAnnotation], compositionUIDAnnotation, a[compositionUIDAnnotation], chunkCountAnnotation, a[chunkCountAnnotation])
			}
		}
		return nil
	})
}

// recoverySlices lists the ResourceSlices of the namespace named like a recovery slice of comp.
func (s *scenario) recoverySlices(ctx context.Context, comp string) ([]string, error) {
	list, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sl := range list.Items {
		if strings.HasPrefix(sl.GetName(), comp+"-recovery-") {
			names = append(names, sl.GetName())
		}
	}
	return names, nil
}

// syntheses returns the distinct synthesis UUIDs the executor ran for the Composition since
// the given time, in order.
func (s *scenario) syntheses(comp string, since time.Time) []string {
	var uuids []string
	seen := map[string]bool{}
	for _, run := range standIn.runsFor(s.ns, comp, since) {
		if !seen[run.SynthesisUUID] {
			seen[run.SynthesisUUID] = true
			uuids = append(uuids, run.SynthesisUUID)
		}
	}
	return uuids
}

// watchDeleted waits, with a watch from resourceVersion on, until the ConfigMap is deleted and
// returns when the watch delivered the deletion.
func (s *scenario) watchDeleted(name, resourceVersion string) time.Time {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	w, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: resourceVersion,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			return time.Now()
		}
	}
	s.checkProcesses()
	s.t.Fatalf("ConfigMap %s/%s not deleted within %s", s.ns, name, waitLong)
	return time.Time{}
}

// carriesTombstone reports whether a slice of the synthesis holds a tombstone of the ConfigMap.
func (s *scenario) carriesTombstone(syn synthesis, configMap string) bool {
	s.t.Helper()
	for _, name := range syn.Slices {
		slice, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).Get(s.ctx(), name, metav1.GetOptions{})
		if err != nil {
			s.t.Fatalf("reading slice %s of synthesis %s: %v", name, syn.UUID, err)
		}
		resources, _, _ := unstructured.NestedSlice(slice.Object, "spec", "resources")
		for _, r := range resources {
			m, _ := r.(map[string]any)
			manifest, _ := m["manifest"].(string)
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if m["deleted"] == true && json.Unmarshal([]byte(manifest), &obj) == nil &&
				obj.Kind == "ConfigMap" && obj.Metadata.Name == configMap && obj.Metadata.Namespace == s.ns {
				return true
			}
		}
	}
	return false
}
