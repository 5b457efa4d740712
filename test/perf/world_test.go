package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

const (
	enoAPIVersion = "eno.azure.io/v1"
	// binaryQPS and binaryBurst are `tombstone-recovery run`'s --kube-api-qps and --kube-api-burst defaults.
	binaryQPS   = 50
	binaryBurst = 100
	// eventually bounds how long a cache or the event broadcaster may lag.
	eventually = 30 * time.Second
)

// synthesizedAt is every synthesis's time; second precision, as Eno writes it.
var synthesizedAt = time.Now().UTC().Add(-time.Hour).Truncate(time.Second)

// admin is the setup client: never counted, and fast (setup is not what is measured).
type admin struct {
	kubetest.Clients
	// skipObjects leaves the syntheses' objects out of the downstream cluster: for runs that
	// only record, where no recovery reads them (design §6.3).
	skipObjects bool
}

func newAdmin(t testing.TB) admin {
	t.Helper()
	cfg := env.AdminConfig()
	cfg.QPS, cfg.Burst = 5000, 10000
	return admin{Clients: kubetest.NewClients(t, cfg)}
}

// extraLabels is how many more labels each manifest carries (ENO_SCALE_EXTRA_LABELS in
// TestScale): labels are recorded, so they make the inventories larger with the same resources.
var extraLabels int

// manifest is resource i of a synthesis: mostly ConfigMaps, every 10th a Deployment, every 50th
// a ClusterRole, each with labels and a deletion group as Eno manifests carry them.
func manifest(namespace string, i int) string {
	labels := map[string]string{"app.kubernetes.io/name": "perf", "app.kubernetes.io/instance": fmt.Sprintf("i%04d", i)}
	for k := range extraLabels {
		labels[fmt.Sprintf("perf.example.com/padding-%02d", k)] = fmt.Sprintf("value-%04d-%02d", i, k)
	}
	m := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": fmt.Sprintf("res-%04d", i), "namespace": namespace,
			"labels":      labels,
			"annotations": map[string]string{domain.AnnotationDeletionGroup: fmt.Sprint(i % 3)},
		},
		"data": map[string]string{"key": "value"},
	}
	switch {
	case i%50 == 49:
		m["apiVersion"], m["kind"] = "rbac.authorization.k8s.io/v1", "ClusterRole"
		delete(m["metadata"].(map[string]any), "namespace")
		delete(m, "data")
	case i%10 == 9:
		m["apiVersion"], m["kind"] = "apps/v1", "Deployment"
		delete(m, "data")
		pod := map[string]string{"app.kubernetes.io/instance": fmt.Sprintf("i%04d", i)}
		m["spec"] = map[string]any{"replicas": 1, "selector": map[string]any{"matchLabels": pod},
			"template": map[string]any{"metadata": map[string]any{"labels": pod},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1"}}}}}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// synthesis is one synthesis of a Composition as Eno's synthesizer publishes it.
type synthesis struct {
	uuid      string
	resources int // res-0000 .. res-<resources-1>
	perSlice  int // resources per ResourceSlice
}

func (s synthesis) sliceNames(comp string) []string {
	n := max(1, (s.resources+s.perSlice-1)/s.perSlice)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%s-%d", comp, s.uuid[:8], i)
	}
	return out
}

// domainSlices is the synthesis as the domain reads it. stamp is the spec.synthesisUUID stock
// Eno writes: the synthesis current when its executor wrote the slices, "" on a Composition's
// first synthesis and the previous one's UUID after that (design §2). Membership never reads it.
func (s synthesis) domainSlices(namespace, comp, stamp string) []domain.ResourceSlice {
	names := s.sliceNames(comp)
	out := make([]domain.ResourceSlice, len(names))
	for i, name := range names {
		out[i] = domain.ResourceSlice{Namespace: namespace, Name: name, SynthesisUUID: stamp}
		for r := i * s.perSlice; r < min(s.resources, (i+1)*s.perSlice); r++ {
			out[i].Resources = append(out[i].Resources, domain.SliceResource{Manifest: manifest(namespace, r)})
		}
	}
	return out
}

// chunks is how many chunks recording this synthesis makes with maxChunkBytes.
func (s synthesis) chunks(t testing.TB, namespace, comp string, maxChunkBytes int) int {
	t.Helper()
	c := domain.Composition{Namespace: namespace, Name: comp, Synthesis: &domain.Synthesis{
		UUID: s.uuid, Synthesized: synthesizedAt, Ready: true, Slices: s.sliceNames(comp),
	}}
	contents, err := domain.ReadSynthesis(c, s.domainSlices(namespace, comp, ""))
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(contents.Inventory(), maxChunkBytes, domain.DefaultMaxChunks)
	require.NoError(t, err)
	return len(chunks)
}

// resourcesForChunks is a resource count whose inventory makes exactly n chunks of
// maxChunkBytes: the middle of the range of counts that do.
func resourcesForChunks(t testing.TB, n, maxChunkBytes int) int {
	t.Helper()
	var fits []int
	for r := 1; r < 2000; r++ {
		got := synthesis{uuid: "00000000-probe", resources: r, perSlice: r}.chunks(t, "probe-ns-xxxxx", "probe", maxChunkBytes)
		if got == n {
			fits = append(fits, r)
		}
		if got > n {
			break
		}
	}
	require.NotEmpty(t, fits, "no resource count makes %d chunks of %d bytes", n, maxChunkBytes)
	return fits[len(fits)/2]
}

// createSlices creates the synthesis's ResourceSlices, as the synthesizer would. The objects
// the synthesis produces are applied downstream first (the test API server is also the
// downstream cluster), as eno-reconciler would have applied them before the synthesis is Ready
// and its history is written (design §6.3 reads them).
func (a admin) createSlices(ctx context.Context, namespace, comp, stamp string, s synthesis) error {
	if !a.skipObjects {
		var produced []string
		for r := range s.resources {
			produced = append(produced, manifest(namespace, r))
		}
		if err := a.ApplyDownstream(ctx, produced...); err != nil {
			return err
		}
	}
	for _, sl := range s.domainSlices(namespace, comp, stamp) {
		if _, err := kubetest.CreateSlice(ctx, a.Dynamic, sl); err != nil {
			return fmt.Errorf("creating slice %s: %w", sl.Name, err)
		}
	}
	return nil
}

// status is the synthesis as status.currentSynthesis of Composition comp: Ready.
func (s synthesis) status(comp string) domain.Synthesis {
	return domain.Synthesis{UUID: s.uuid, Synthesized: synthesizedAt, Ready: true, Slices: s.sliceNames(comp)}
}

// createComposition creates an opted-in Composition with its slices and a Ready synthesis, and
// returns it as stored.
func (a admin) createComposition(ctx context.Context, namespace, name string, s synthesis) (*unstructured.Unstructured, error) {
	// A new Composition has no current synthesis yet: Eno stamps its first slices "".
	if err := a.createSlices(ctx, namespace, name, "", s); err != nil {
		return nil, err
	}
	status := s.status(name)
	u, err := kubetest.CreateComposition(ctx, a.Dynamic, domain.Composition{
		Namespace: namespace, Name: name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis:   &status,
	})
	if err != nil {
		return nil, fmt.Errorf("creating composition %s/%s: %w", namespace, name, err)
	}
	return u, nil
}

// resynthesize publishes a new synthesis of an existing Composition.
func (a admin) resynthesize(ctx context.Context, namespace, name string, s synthesis) (*unstructured.Unstructured, error) {
	client := a.Dynamic.Resource(k8s.CompositionGVR).Namespace(namespace)
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	// Eno stamps the new slices with the synthesis still current while its executor writes them.
	stamp, _, _ := unstructured.NestedString(u.Object, "status", "currentSynthesis", "uuid")
	if err := a.createSlices(ctx, namespace, name, stamp, s); err != nil {
		return nil, err
	}
	u.Object["status"] = kubetest.CompositionStatus(s.status(name))
	return client.UpdateStatus(ctx, u, metav1.UpdateOptions{})
}

// controller is the binary's wiring (cmd/tombstone-recovery/run.go) built in-process, with
// every client counted: informers, adapters, the event recorder, the service. The tests call
// Service.Reconcile, the unit of work of the controller's workers.
type controller struct {
	svc      *app.Service
	informer *kubetest.CompositionInformer
	secrets  *kubetest.SecretCache
	store    *k8s.SecretStore
	counter  *Counter
}

func startController(t testing.TB, namespace, inventoryNamespace string, maxChunkBytes int) *controller {
	t.Helper()
	counter := NewCounter()
	cfg := func() *rest.Config {
		c := env.AdminConfig()
		c.QPS, c.Burst = binaryQPS, binaryBurst
		c.UserAgent = "eno-tombstone-recovery"
		return counter.Wrap(c)
	}
	cp, err := kubernetes.NewForConfig(cfg())
	require.NoError(t, err)
	remote, err := kubernetes.NewForConfig(cfg())
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	informer := kubetest.NewCompositionInformer(dyn, namespace)
	comps, err := k8s.NewCompositions(dyn, informer.Lister())
	require.NoError(t, err)
	slices, err := k8s.NewSlices(dyn)
	require.NoError(t, err)
	sink, err := k8s.NewTombstoneSink(dyn)
	require.NoError(t, err)
	meta, err := metadata.NewForConfig(cfg())
	require.NoError(t, err)
	secrets := kubetest.NewSecretCache(meta, inventoryNamespace)
	store, err := k8s.NewSecretStore(remote.CoreV1(), secrets, inventoryNamespace)
	require.NoError(t, err)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cp.CoreV1().Events("")})
	recorder, err := k8s.NewRecorder(broadcaster.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: k8s.DefaultEventSource}))
	require.NoError(t, err)
	informer.Start(ctx)
	secrets.Start(ctx)
	t.Cleanup(func() {
		cancel()
		broadcaster.Shutdown()
		informer.Wait()
		secrets.Wait()
	})
	require.NoError(t, informer.WaitForCacheSync(ctx))
	require.NoError(t, secrets.WaitForCacheSync(ctx))

	c := app.DefaultConfig()
	c.Enabled, c.ControlPlane = true, "perf"
	c.Scope = domain.Scope{Namespace: namespace, Selector: domain.Everything}
	c.InventoryNamespace = inventoryNamespace
	c.MaxChunkBytes = maxChunkBytes
	downstream, err := k8s.NewDownstreamObjects(meta, dyn, remote.Discovery())
	require.NoError(t, err)
	// The fleet index's list and watch are its own, not any reconcile's: they are not counted.
	svc, err := app.New(c, app.Deps{
		Compositions: comps, Live: comps, Slices: slices, Fleet: runFleetIndex(t, env.AdminClients(t)), Store: store,
		Sink: sink, Decisions: comps, Downstream: downstream, Events: recorder,
	})
	require.NoError(t, err)
	return &controller{svc: svc, informer: informer, secrets: secrets, store: store, counter: counter}
}

// waitCached waits until the Composition cache holds resourceVersion rv of ref (or later).
func (c *controller) waitCached(t testing.TB, ref domain.CompositionRef, rv string) {
	t.Helper()
	require.Eventually(t, func() bool {
		obj, err := c.informer.Lister().ByNamespace(ref.Namespace).Get(ref.Name)
		if err != nil {
			return false
		}
		got := obj.(*unstructured.Unstructured).GetResourceVersion()
		return len(got) > len(rv) || (len(got) == len(rv) && got >= rv)
	}, eventually, 5*time.Millisecond, "the composition cache never saw %s at resourceVersion %s", ref, rv)
}

// waitSettled waits until both caches reflect what the last reconcile wrote (the decision and a
// complete snapshot), so the next reconcile of ref is the steady state. It reads caches only.
func (c *controller) waitSettled(t testing.TB, ref domain.CompositionRef) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		obj, err := c.informer.Lister().ByNamespace(ref.Namespace).Get(ref.Name)
		if err != nil {
			return false
		}
		u := obj.(*unstructured.Unstructured)
		uuid, _, _ := unstructured.NestedString(u.Object, "status", "currentSynthesis", "uuid")
		d, err := domain.ParseDecision(u.GetAnnotations()[domain.AnnotationDecision])
		if err != nil || d.SynthesisUUID != uuid {
			return false
		}
		comp := domain.Composition{Namespace: ref.Namespace, Name: ref.Name, UID: string(u.GetUID()), Synthesis: &domain.Synthesis{UUID: uuid}}
		cached, err := c.store.ListCachedChunks(ctx, domain.DefaultLineage(ref.Namespace, ref.Name))
		if err != nil {
			return false
		}
		comp.Name, comp.Namespace = ref.Name, ref.Namespace
		_, ok := domain.RecordedByMetadata(cached, comp, time.Now(), domain.DefaultMaxChunks)
		return ok // the cache holds metadata only, as the fast path reads it
	}, eventually, 5*time.Millisecond, "the caches never settled for %s", ref)
}

// reconcile runs one Reconcile and returns the requests it made, waiting for the asynchronous
// event writes it caused (wantEvents of them) before taking the count.
func (c *controller) reconcile(t testing.TB, ref domain.CompositionRef, wantEvents int) (app.Result, Counts) {
	t.Helper()
	before := c.counter.Snapshot()
	res, err := c.svc.Reconcile(context.Background(), ref)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.counter.Snapshot().Sub(before).Events() >= wantEvents },
		eventually, time.Millisecond, "the reconcile of %s should emit %d events", ref, wantEvents)
	return res, c.counter.Snapshot().Sub(before)
}

// runFleetIndex runs a fleet index over c until the test ends, once it has synced.
func runFleetIndex(t testing.TB, c kubetest.Clients) *k8s.FleetIndex {
	t.Helper()
	fleet, err := k8s.NewFleetIndex(c.Dynamic)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { fleet.Run(ctx) })
	t.Cleanup(func() { cancel(); running.Wait() })
	require.True(t, fleet.WaitForCacheSync(kubetest.Context(t, time.Minute)), "the fleet index never synced")
	return fleet
}
