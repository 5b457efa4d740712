package resilience_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/runnable"
)

// lockedBuffer is a log sink that goroutines write to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// jsonLogger builds the binary's production logger (cmd/tombstone-recovery/logging.go): zap's
// JSON encoder through zapr, at logr verbosity v (zap level -v).
func jsonLogger(w io.Writer, v int) logr.Logger {
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(encCfg), zapcore.AddSync(w), zap.NewAtomicLevelAt(zapcore.Level(-v)))
	return zapr.NewLogger(zap.New(core))
}

// inProcessController wires the controller as cmd/tombstone-recovery's run does (a
// controller-runtime manager with runnable.SetupWithManager) over cfg, plus the adapters the
// test drives by hand.
type inProcessController struct {
	sink         *k8s.TombstoneSink
	compositions *k8s.Compositions
	stopOnce     sync.Once
	stopFn       func()
}

func startInProcessController(t *testing.T, cfg *rest.Config, ns string, log logr.Logger, maxChunkBytes int) *inProcessController {
	t.Helper()
	c := kubetest.NewClients(t, cfg)
	comps, err := k8s.NewCompositions(c.Dynamic, nil)
	require.NoError(t, err)
	sink, err := k8s.NewTombstoneSink(c.Dynamic)
	require.NoError(t, err)
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	require.NoError(t, err)
	opts := runnable.DefaultOptions()
	opts.Scope.Namespace, opts.Enabled, opts.InventoryNamespace = ns, true, inventoryNamespace
	opts.MaxChunkBytes, opts.MaxTombstoneFraction = maxChunkBytes, 1
	opts.EveryReplica, opts.Logger = true, log
	_, err = runnable.SetupWithManager(mgr, nil, opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, mgr.Start(ctx))
	}()
	p := &inProcessController{sink: sink, compositions: comps, stopFn: func() { cancel(); <-done }}
	t.Cleanup(p.stop)
	return p
}

func (p *inProcessController) stop() { p.stopOnce.Do(p.stopFn) }

// lifecycle is what one full run recorded.
type lifecycle struct {
	ns     string
	marker string
	calls  []call
	logs   string
	chunks [][]byte // every chunk's inventory.json the lifecycle wrote
}

// runLifecycle drives a Composition through its whole story with the controller running as
// the deploy/ ServiceAccount: slices late (refusals, repeated events), first synthesis
// (NoInventory, recording), resynthesis (SameIncarnation, replacement), recreation (Recovered,
// tombstones, replacement); then the tombstone sink's reuse path and a leader election. Every
// request goes through a recorder; the logs go to a JSON logger at -v=2.
func runLifecycle(t *testing.T) lifecycle {
	t.Helper()
	ctx := kubetest.Context(t, 3*time.Minute)
	c := env.AdminClients(t)
	l := lifecycle{ns: c.NewNamespace(t, "secure"), marker: newMarker(t)}
	ns, ref := l.ns, domain.CompositionRef{Namespace: l.ns, Name: "web"}
	lineage := domain.DefaultLineage(ns, "web")
	rec := &recorder{}
	cfg := env.UserConfig(controllerUser)
	cfg.Wrap(rec.wrap)
	var logs lockedBuffer
	ctrl := startInProcessController(t, cfg, ns, jsonLogger(&logs, 2), 300)

	withMarker := func(names ...string) []resource {
		out := make([]resource, len(names))
		for i, n := range names {
			out[i] = resource{Name: n + "-" + l.marker, Labels: markerLabels(l.marker)}
		}
		return out
	}
	capture := func(s *synthesis) {
		t.Helper()
		require.Eventually(t, func() bool {
			snap, err := readSnapshot(ctx, c, lineage)
			return err == nil && snap.SynthesisUUID() == s.UUID
		}, eventually, poll, "the snapshot of synthesis %s", s.UUID)
		snap, err := readSnapshot(ctx, c, lineage)
		require.NoError(t, err)
		assert.Equal(t, s.ids(), snapshotIDs(snap))
		for _, ch := range snap.Chunks() {
			l.chunks = append(l.chunks, ch.Data[domain.SecretDataKey])
		}
	}
	decidedOn := func(ref domain.CompositionRef, s *synthesis, want domain.Outcome) domain.Decision {
		t.Helper()
		var d domain.Decision
		require.Eventually(t, func() bool {
			live, err := liveComposition(ctx, c, ref)
			if err != nil {
				return false
			}
			var ok bool
			d, ok = live.FinishedDecision()
			return ok && d.SynthesisUUID == s.UUID
		}, eventually, poll, "a decision for synthesis %s", s.UUID)
		require.Equal(t, want, d.Outcome, d.Message)
		return d
	}
	decided := func(s *synthesis, want domain.Outcome) domain.Decision {
		t.Helper()
		return decidedOn(ref, s, want)
	}

	// A Composition outside the opt-in, which the controller must skip (a V(2) log line).
	_, err := createCompositionWith(ctx, c, ns, "not-opted-in", nil, newSynthesis(withMarker("other")))
	require.NoError(t, err)

	// 1. The status names slices that do not exist yet: refused, retried, the event repeats.
	first := newSynthesis(withMarker("settings", "deployment", "service", "role", "binding"))
	first.nameSlices("web")
	_, err = createComposition(ctx, c, ns, "web", nil)
	require.NoError(t, err)
	require.NoError(t, setStatus(ctx, c, ns, "web", first))
	require.Eventually(t, func() bool {
		evs, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=SliceMissing"})
		return err == nil && len(evs.Items) == 1 && evs.Items[0].Count >= 2
	}, eventually, poll, "the SliceMissing event repeats (aggregated with a patch)")
	require.NoError(t, publishSlices(ctx, c, ns, "web", first))
	decided(first, domain.OutcomeNoInventory)
	capture(first)

	// 2. A resynthesis of the same incarnation replaces the snapshot.
	second := newSynthesis(withMarker("settings", "deployment", "service", "role", "binding", "ingress", "hpa"))
	require.NoError(t, resynthesize(ctx, c, ns, "web", second))
	decided(second, domain.OutcomeNothingToRecover)
	capture(second)

	// 3. The Composition is recreated with fewer resources: recovery publishes tombstones.
	third := newSynthesis(withMarker("settings", "deployment"))
	_, err = recreateComposition(ctx, c, ns, "web", third)
	require.NoError(t, err)
	d := decided(third, domain.OutcomeRecovered)
	got, _, err := tombstoneSliceIDs(ctx, c, ns, d.TombstoneSlice)
	require.NoError(t, err)
	assert.Equal(t, minus(second.ids(), third.ids()), got)
	// Eno's next synthesis carries the tombstones (design §6.2); it is the one recorded.
	carried := withMarker("settings", "deployment")
	for _, id := range got {
		carried = append(carried, resource{Name: id[strings.LastIndex(id, "/")+1:], Deleted: true})
	}
	fourth := newSynthesis(carried)
	require.NoError(t, resynthesize(ctx, c, ns, "web", fourth))
	decided(fourth, domain.OutcomeNothingToRecover)
	capture(fourth)

	// 3b. One object of every kind the downstream RBAC lets the controller read (design §6.3), each
	// orphaned by a recreation: each is read downstream, found older than the history, and
	// tombstoned.
	kindsRef := domain.CompositionRef{Namespace: ns, Name: "kinds"}
	kept := resource{Name: "kept-" + l.marker, Labels: markerLabels(l.marker)}
	every := []resource{kept}
	for _, kind := range slices.Sorted(maps.Keys(downstreamKinds)) {
		every = append(every, resource{Name: "kinds-" + l.marker, Kind: kind, Labels: markerLabels(l.marker)})
	}
	kindsFirst := newSynthesis(every)
	_, err = createComposition(ctx, c, ns, kindsRef.Name, kindsFirst)
	require.NoError(t, err)
	decidedOn(kindsRef, kindsFirst, domain.OutcomeNoInventory)
	require.Eventually(t, func() bool {
		snap, err := readSnapshot(ctx, c, domain.DefaultLineage(ns, kindsRef.Name))
		return err == nil && snap.SynthesisUUID() == kindsFirst.UUID
	}, eventually, poll, "the snapshot of synthesis %s", kindsFirst.UUID)
	kindsSecond := newSynthesis([]resource{kept})
	_, err = recreateComposition(ctx, c, ns, kindsRef.Name, kindsSecond)
	require.NoError(t, err)
	// A Namespace's and a ServiceAccount's deletions cascade: never handed to Eno, each listed
	// with the command to delete it after looking (design §6.3).
	d = decidedOn(kindsRef, kindsSecond, domain.OutcomeRecovered)
	cascading := []string{resource{Name: "kinds-" + l.marker, Kind: "Namespace"}.id(), resource{Name: "kinds-" + l.marker, Kind: "ServiceAccount"}.id()}
	assert.Contains(t, d.Message, "kubectl delete namespace kinds-"+l.marker+"; kubectl delete serviceaccount kinds-"+l.marker+" -n "+workloadNamespace)
	got, _, err = tombstoneSliceIDs(ctx, c, ns, d.TombstoneSlice)
	require.NoError(t, err)
	assert.Equal(t, minus(kindsFirst.ids(), append(kindsSecond.ids(), cascading...)), got, "one tombstone of every kind but the cascading ones")
	assert.Len(t, got, len(downstreamKinds)-2)
	ctrl.stop()

	// 4. The hand-off (design §6.2) on a Composition of its own: armed, a recovery slice created
	// (a retry reuses it unchanged, never rewrites it), appended to the synthesis through the
	// status subresource, and a resynthesis is requested.
	spareSynthesis := &synthesis{UUID: string(uuid.NewUUID())}
	_, err = createCompositionWith(ctx, c, ns, "spare", nil, spareSynthesis)
	require.NoError(t, err)
	spare, err := ctrl.compositions.LiveComposition(ctx, domain.CompositionRef{Namespace: ns, Name: "spare"})
	require.NoError(t, err)
	ts := []domain.Tombstone{
		{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: workloadNamespace, Name: "a"}, UID: testUID},
		{Entry: domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: workloadNamespace, Name: "b"}, UID: testUID},
	}
	h, err := domain.NewHandoff(domain.RecoveryPlan{Decision: domain.Decision{SynthesisUUID: spare.SynthesisUUID(), Outcome: domain.OutcomeRecovered}, Tombstones: ts,
		HistoryWritten: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	spare, err = ctrl.sink.ArmTombstones(ctx, spare, h.Digest)
	require.NoError(t, err)
	name, err := ctrl.sink.CreateRecoverySlice(ctx, spare, h, 0)
	require.NoError(t, err)
	again, err := ctrl.sink.CreateRecoverySlice(ctx, spare, h, 0)
	require.NoError(t, err)
	require.Equal(t, name, again)
	got, _, err = tombstoneSliceIDs(ctx, c, ns, name)
	require.NoError(t, err)
	assert.Len(t, got, 2)
	spare, err = ctrl.sink.AppendRecoverySlice(ctx, spare, name)
	require.NoError(t, err)
	require.NoError(t, ctrl.sink.RequestResynthesis(ctx, spare))

	// 5. Leader election, as `run --leader-elect` does it, in the controller's namespace.
	elect(t, ctx, cfg, "resilience-"+l.marker)

	l.calls, l.logs = rec.all(), logs.String()
	return l
}

// testUID is the UID recovery saw of every object the tests hand over as a tombstone.
const testUID = "0f1e2d3c-0000-4000-8000-000000000001"

var (
	appsDeployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	coreSecrets     = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// elect acquires and releases a Lease in eno-system as the deploy/ ServiceAccount.
func elect(t *testing.T, ctx context.Context, cfg *rest.Config, lease string) {
	t.Helper()
	c := kubetest.NewClients(t, cfg)
	started := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "eno-system", Name: lease},
			Client:     c.Kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "resilience"},
		},
		ReleaseOnCancel: true,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		Name:            lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(started) },
			OnStoppedLeading: func() {},
		},
	})
	require.NoError(t, err)
	electCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); elector.Run(electCtx) }()
	select {
	case <-started:
	case <-time.After(eventually):
		t.Error("never became leader")
	}
	stop()
	<-done
	held, err := env.AdminClients(t).Kube.CoordinationV1().Leases("eno-system").Get(ctx, lease, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ptrValue(held.Spec.LeaseDurationSeconds), "the lease was released")
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// grants expands the rules of every Role and ClusterRole in deploy/ into "verb resource.group",
// but Eno's grant to impersonate the controller's ServiceAccount, which is not the controller's.
func grants(t *testing.T) map[string]bool {
	t.Helper()
	objs, err := readManifests(deployManifests...)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, obj := range objs {
		if k := obj.GetKind(); (k != "Role" && k != "ClusterRole") || obj.GetName() == "eno-tombstone-recovery-impersonation" {
			continue
		}
		rules, _ := obj.Object["rules"].([]any)
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			for _, g := range strs(rule["apiGroups"]) {
				for _, res := range strs(rule["resources"]) {
					for _, v := range strs(rule["verbs"]) {
						key := v + " " + res
						if g != "" {
							key += "." + g
						}
						out[key] = true
					}
				}
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func strs(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// TestSecurityOfAFullLifecycle runs the lifecycle once and checks the security properties on
// what it recorded.
func TestSecurityOfAFullLifecycle(t *testing.T) {
	l := runLifecycle(t)
	require.NotEmpty(t, l.calls)
	managedBy := domain.LabelManagedBy + "=" + domain.ManagedByValue

	t.Run("every Secret request stays in the inventory namespace, selected or labelled as ours", func(t *testing.T) {
		secretCalls := 0
		for _, c := range l.calls {
			if c.Resource != "secrets" {
				continue
			}
			secretCalls++
			assert.True(t, strings.HasPrefix(c.Path, "/api/v1/namespaces/"+inventoryNamespace+"/secrets"), "%s %s", c.Method, c.Path)
			switch c.Verb {
			case "list", "watch":
				sel, err := labels.Parse(c.LabelSelector)
				if assert.NoError(t, err, c.Path) {
					reqs, _ := sel.Requirements()
					ours := false
					for _, r := range reqs {
						if (r.Key() == domain.LabelManagedBy || r.Key() == domain.LabelLineage) &&
							(r.Operator() == selection.Equals || r.Operator() == selection.DoubleEquals) {
							ours = true
						}
					}
					assert.True(t, ours, "%s secrets without our managed-by or lineage selector: %q", c.Verb, c.LabelSelector)
				}
			case "create", "update":
				obj, err := bodyMeta(c.Body)
				if assert.NoError(t, err, c.Path) {
					assert.Equal(t, domain.ManagedByValue, obj.GetLabels()[domain.LabelManagedBy], "%s %s writes a Secret without %s", c.Verb, c.Path, managedBy)
					assert.Equal(t, inventoryNamespace, obj.GetNamespace())
				}
			case "get":
			default:
				t.Errorf("unexpected %s on secrets: %s", c.Verb, c.Path)
			}
		}
		assert.Positive(t, secretCalls)
	})

	t.Run("nothing is ever deleted", func(t *testing.T) {
		for _, c := range l.calls {
			assert.NotContains(t, []string{"delete", "deletecollection"}, c.Verb, "%s %s", c.Method, c.Path)
		}
	})

	t.Run("logs at -v=2 hold no Secret data", func(t *testing.T) {
		require.NotEmpty(t, l.chunks)
		for _, line := range []string{`"msg":"skipping composition"`, `"msg":"wrote inventory chunk"`, `"msg":"recovery decided"`} {
			assert.Contains(t, l.logs, line, "the logger saw the verbose lines (so the scan means something)")
		}
		assert.Empty(t, leaks(l.logs, l.marker, l.chunks))
	})

	t.Run("the deploy RBAC sufficed: no request was denied", func(t *testing.T) {
		for _, c := range l.calls {
			assert.NotEqual(t, 403, c.Status, "%s %s", c.Method, c.Path)
		}
	})

	t.Run("the deploy RBAC grants nothing the controller does not use", func(t *testing.T) {
		used := map[string]bool{}
		for _, c := range l.calls {
			if strings.HasPrefix(c.Resource, "nonresource:") {
				continue
			}
			used[c.key()] = true
			if c.StreamingList {
				// An informer's list: the reflector falls back to a plain LIST when streaming
				// lists are unavailable, so the grant is needed either way.
				list := c
				list.Verb = "list"
				used[list.key()] = true
			}
			if c.Verb == "update" && c.Resource == "secrets" {
				// Updates start from the cached object and GET it live only when the cache lags
				// (adapters/k8s UpdateChunk), so the get grant is needed either way.
				get := c
				get.Verb = "get"
				used[get.key()] = true
			}
		}
		granted := grants(t)
		var unused, ungranted []string
		for g := range granted {
			if !used[g] {
				unused = append(unused, g)
			}
		}
		for u := range used {
			if !granted[u] {
				ungranted = append(ungranted, u)
			}
		}
		sort.Strings(unused)
		sort.Strings(ungranted)
		assert.Empty(t, unused, "deploy/ grants permissions no part of the controller uses")
		assert.Empty(t, ungranted, "the controller uses permissions deploy/ does not grant")
	})

	t.Run("requests beyond the deploy RBAC are forbidden", func(t *testing.T) {
		ctx := kubetest.Context(t, eventually)
		sa := kubetest.NewClients(t, env.UserConfig(controllerUser))
		comps := sa.Dynamic.Resource(compositionGVR).Namespace(l.ns)
		web, err := env.AdminClients(t).Dynamic.Resource(compositionGVR).Namespace(l.ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		ours := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{domain.LabelManagedBy: domain.ManagedByValue}}, Type: domain.SecretType}
		lineage := domain.DefaultLineage(l.ns, "web")
		for _, probe := range []struct {
			what string
			do   func() error
		}{
			{"delete a chunk Secret", func() error {
				return sa.Kube.CoreV1().Secrets(inventoryNamespace).Delete(ctx, domain.ChunkName("web", lineage, 0), metav1.DeleteOptions{})
			}},
			{"delete the Secrets of kube-system", func() error {
				return sa.Kube.CoreV1().Secrets(inventoryNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: managedBy})
			}},
			{"get a Secret in another namespace", func() error {
				_, err := sa.Kube.CoreV1().Secrets("default").Get(ctx, "anything", metav1.GetOptions{})
				return err
			}},
			{"list Secrets in every namespace", func() error {
				_, err := sa.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: managedBy})
				return err
			}},
			{"create a Secret in default", func() error {
				_, err := sa.Kube.CoreV1().Secrets("default").Create(ctx, ours, metav1.CreateOptions{})
				return err
			}},
			{"list ConfigMaps in kube-system", func() error {
				_, err := sa.Kube.CoreV1().ConfigMaps(inventoryNamespace).List(ctx, metav1.ListOptions{})
				return err
			}},
			{"list Deployments in every namespace (the downstream grant is get only)", func() error {
				_, err := sa.Metadata.Resource(appsDeployments).List(ctx, metav1.ListOptions{})
				return err
			}},
			{"get a Secret's metadata in the workload namespace (Secrets are not a kind of the downstream grant)", func() error {
				_, err := sa.Metadata.Resource(coreSecrets).Namespace(workloadNamespace).Get(ctx, "anything", metav1.GetOptions{})
				return err
			}},
			{"list ConfigMaps in every namespace", func() error {
				_, err := sa.Kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
				return err
			}},
			{"update compositions/status", func() error {
				_, err := comps.UpdateStatus(ctx, web, metav1.UpdateOptions{})
				return err
			}},
			{"update a resource slice (recovery slices are immutable)", func() error {
				sl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": sliceGVR.GroupVersion().String(), "kind": "ResourceSlice",
					"metadata": map[string]any{"name": "web-slice", "namespace": l.ns}}}
				_, err := sa.Dynamic.Resource(sliceGVR).Namespace(l.ns).Update(ctx, sl, metav1.UpdateOptions{})
				return err
			}},
			{"patch a resource slice", func() error {
				_, err := sa.Dynamic.Resource(sliceGVR).Namespace(l.ns).Patch(ctx, "web-slice", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
				return err
			}},
			{"delete a composition", func() error { return comps.Delete(ctx, "web", metav1.DeleteOptions{}) }},
			{"delete a resource slice", func() error {
				return sa.Dynamic.Resource(sliceGVR).Namespace(l.ns).Delete(ctx, domain.RecoverySliceName("web", "x", "0123456789abcdef", 0), metav1.DeleteOptions{})
			}},
			{"create a Lease outside eno-system", func() error {
				_, err := sa.Kube.CoordinationV1().Leases(inventoryNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, metav1.CreateOptions{})
				return err
			}},
		} {
			err := probe.do()
			assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", probe.what, err)
		}
		// The probes changed nothing.
		_, err = env.AdminClients(t).Dynamic.Resource(compositionGVR).Namespace(l.ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		snap, err := readSnapshot(ctx, env.AdminClients(t), lineage)
		require.NoError(t, err, describeSnapshot(snap, err))
	})
	t.Logf("the lifecycle made %d requests; %s", len(l.calls), summarize(l.calls))
}

func summarize(calls []call) string {
	n := map[string]int{}
	for _, c := range calls {
		n[c.key()]++
	}
	out := make([]string, 0, len(n))
	for k, v := range n {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
