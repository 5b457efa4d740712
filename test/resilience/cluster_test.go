package resilience_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

const (
	// inventoryNamespace is where every test keeps its chunk Secrets. Tests never share a lineage:
	// each works in its own generated namespace, and the lineage hashes namespace/name.
	inventoryNamespace = domain.DefaultInventoryNamespace
	// workloadNamespace is the downstream namespace the synthesized ConfigMaps name.
	workloadNamespace = "workloads"
	// eventually bounds every wait for the controller or the API server; the machine is shared.
	eventually = 60 * time.Second
	poll       = 25 * time.Millisecond
)

var (
	compositionGVR = kubetest.CompositionResource
	sliceGVR       = kubetest.ResourceSliceResource
)

// resource is one object a synthesis produces downstream (a ConfigMap unless Kind names another
// of downstreamKinds), or, when Deleted, a tombstone of one that Eno carries (design §6.2).
type resource struct {
	Name    string
	Kind    string
	Labels  map[string]string
	Deleted bool
}

// downstreamKind is a kind with a minimal object of it that the API server accepts.
type downstreamKind struct {
	apiVersion string
	namespaced bool
	// fields are the object's top-level fields besides apiVersion, kind and metadata.
	fields func(name string) map[string]any
}

func podTemplate(name, restartPolicy string) map[string]any {
	spec := map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1"}}}
	if restartPolicy != "" {
		spec["restartPolicy"] = restartPolicy
	}
	return map[string]any{"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": name}}, "spec": spec}
}

func workload(name string) map[string]any {
	return map[string]any{"spec": map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": name}},
		"template": podTemplate(name, ""),
	}}
}

// downstreamKinds are the kinds deploy/downstream/release-downstream.yaml lets the controller read downstream
// (design §6.3), each with an object the API server accepts. The security lifecycle reads one of
// each, so that every grant is used, and tombstones each but the Namespace and the ServiceAccount,
// which cascade.
var downstreamKinds = map[string]downstreamKind{
	"ConfigMap": {"v1", true, func(string) map[string]any { return map[string]any{"data": map[string]string{"key": "value"}} }},
	"Service": {"v1", true, func(string) map[string]any {
		return map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": 80}}}}
	}},
	"ServiceAccount": {"v1", true, func(string) map[string]any { return nil }},
	"Namespace":      {"v1", false, func(string) map[string]any { return nil }},
	"Deployment":     {"apps/v1", true, workload},
	"StatefulSet": {"apps/v1", true, func(name string) map[string]any {
		w := workload(name)
		w["spec"].(map[string]any)["serviceName"] = name
		return w
	}},
	"DaemonSet": {"apps/v1", true, workload},
	"Job": {"batch/v1", true, func(name string) map[string]any {
		return map[string]any{"spec": map[string]any{"template": podTemplate(name, "Never")}}
	}},
	"CronJob": {"batch/v1", true, func(name string) map[string]any {
		return map[string]any{"spec": map[string]any{"schedule": "0 3 * * *",
			"jobTemplate": map[string]any{"spec": map[string]any{"template": podTemplate(name, "Never")}}}}
	}},
	"Ingress": {"networking.k8s.io/v1", true, func(name string) map[string]any {
		return map[string]any{"spec": map[string]any{"defaultBackend": map[string]any{
			"service": map[string]any{"name": name, "port": map[string]any{"number": 80}}}}}
	}},
	"PodDisruptionBudget": {"policy/v1", true, func(string) map[string]any {
		return map[string]any{"spec": map[string]any{"maxUnavailable": 1}}
	}},
	"HorizontalPodAutoscaler": {"autoscaling/v2", true, func(name string) map[string]any {
		return map[string]any{"spec": map[string]any{"maxReplicas": 2,
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": name}}}
	}},
	"Role": {"rbac.authorization.k8s.io/v1", true, func(string) map[string]any { return map[string]any{"rules": []any{}} }},
	"RoleBinding": {"rbac.authorization.k8s.io/v1", true, func(name string) map[string]any {
		return map[string]any{"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}
	}},
	"ClusterRole": {"rbac.authorization.k8s.io/v1", false, func(string) map[string]any { return map[string]any{"rules": []any{}} }},
	"ClusterRoleBinding": {"rbac.authorization.k8s.io/v1", false, func(name string) map[string]any {
		return map[string]any{"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}}
	}},
}

func (r resource) kind() (string, downstreamKind) {
	k := r.Kind
	if k == "" {
		k = "ConfigMap"
	}
	dk, ok := downstreamKinds[k]
	if !ok {
		panic("no downstream kind " + k)
	}
	return k, dk
}

// entry is r as an inventory records it.
func (r resource) entry() domain.Entry {
	kind, dk := r.kind()
	e := domain.Entry{Version: dk.apiVersion, Kind: kind, Name: r.Name, Labels: r.Labels}
	if g, v, ok := strings.Cut(dk.apiVersion, "/"); ok {
		e.Group, e.Version = g, v
	}
	if dk.namespaced {
		e.Namespace = workloadNamespace
	}
	return e
}

func (r resource) id() string { return r.entry().ID().String() }

// manifest is the Eno manifest of r. Its data and spec never enter an inventory.
func (r resource) manifest() string {
	kind, dk := r.kind()
	meta := map[string]any{"name": r.Name}
	if dk.namespaced {
		meta["namespace"] = workloadNamespace
	}
	if len(r.Labels) > 0 {
		meta["labels"] = r.Labels
	}
	obj := map[string]any{"apiVersion": dk.apiVersion, "kind": kind, "metadata": meta}
	for k, v := range dk.fields(r.Name) {
		obj[k] = v
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

func resources(names ...string) []resource {
	out := make([]resource, len(names))
	for i, n := range names {
		out[i] = resource{Name: n}
	}
	return out
}

// numbered is prefix-00 .. prefix-(n-2) plus "shared", which every synthesis of a scenario
// produces, so no recovery tombstones everything.
func numbered(prefix string, n int) []resource {
	names := make([]string, 0, n)
	for i := range n - 1 {
		names = append(names, fmt.Sprintf("%s-%02d", prefix, i))
	}
	return resources(append(names, "shared")...)
}

// synthesis is one synthesis as Eno would publish it: slices first, then the status.
type synthesis struct {
	UUID      string
	At        time.Time
	Resources []resource
	// PerSlice spreads the resources over slices of at most this many (0: one slice).
	PerSlice int
	slices   []string
}

// synthesisClock hands out strictly increasing synthesis timestamps, second precision, in the
// past (a snapshot more than 5 minutes ahead of the reader's clock would be refused).
var synthesisClock atomic.Int64

func newSynthesis(rs []resource) *synthesis {
	base := time.Now().UTC().Truncate(time.Second).Add(-2 * time.Hour)
	return &synthesis{
		UUID:      string(uuid.NewUUID()),
		At:        base.Add(time.Duration(synthesisClock.Add(1)) * time.Second),
		Resources: rs,
	}
}

// ids are the resources the synthesis produces: its tombstones are not among them.
func (s *synthesis) ids() []string { return idsOf(s.Resources) }

func idsOf(rs []resource) []string {
	out := []string{}
	for _, r := range rs {
		if !r.Deleted {
			out = append(out, r.id())
		}
	}
	sort.Strings(out)
	return out
}

// minus is the sorted IDs of a that b does not produce: what recovery must tombstone.
func minus(a, b []string) []string {
	out := []string{}
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// nameSlices names the synthesis's ResourceSlices for composition comp and returns how the
// resources spread over them.
func (s *synthesis) nameSlices(comp string) [][]resource {
	per := s.PerSlice
	if per <= 0 {
		per = max(len(s.Resources), 1)
	}
	s.slices = nil
	var out [][]resource
	for i := 0; i == 0 || i*per < len(s.Resources); i++ {
		s.slices = append(s.slices, fmt.Sprintf("%s-%s-%d", comp, s.UUID[:8], i))
		out = append(out, s.Resources[i*per:min((i+1)*per, len(s.Resources))])
	}
	return out
}

// publishSlices creates the synthesis's ResourceSlices in ns for composition comp. Stock Eno
// stamps spec.synthesisUUID with the synthesis current when its executor writes the slice: ""
// on a first synthesis, the previous UUID after that (design §2). These tests stamp "" always;
// membership comes from status.currentSynthesis.resourceSlices alone. The objects the synthesis
// produces are applied downstream first (the test API server is also the downstream cluster),
// as eno-reconciler would have applied them before the synthesis is Ready and its history is
// written (design §6.3 reads them). Nothing here deletes downstream: no Eno runs.
func publishSlices(ctx context.Context, c kubetest.Clients, ns, comp string, s *synthesis) error {
	var produced []string
	for _, r := range s.Resources {
		if !r.Deleted {
			produced = append(produced, r.manifest())
		}
	}
	if err := downstreamAdmin.ApplyDownstream(ctx, produced...); err != nil {
		return err
	}
	// Stock Eno stamps a slice with the synthesis current while its executor writes it: "" on a
	// Composition's first synthesis (or one not created yet), the previous UUID after that (design §2).
	var stamp string
	switch cur, err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Get(ctx, comp, metav1.GetOptions{}); {
	case err == nil:
		stamp, _, _ = unstructured.NestedString(cur.Object, "status", "currentSynthesis", "uuid")
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading composition %s/%s before its slices: %w", ns, comp, err)
	}
	for i, chunk := range s.nameSlices(comp) {
		slice := domain.ResourceSlice{Namespace: ns, Name: s.slices[i], SynthesisUUID: stamp}
		for _, r := range chunk {
			slice.Resources = append(slice.Resources, domain.SliceResource{Manifest: r.manifest(), Deleted: r.Deleted})
		}
		if _, err := kubetest.CreateSlice(ctx, c.Dynamic, slice); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating slice %s/%s: %w", ns, slice.Name, err)
		}
	}
	return nil
}

// setStatus points the Composition's current synthesis at s, Ready, through the status
// subresource. A merge patch carries no resourceVersion, so controllers writing annotations at
// the same time never make it conflict.
func setStatus(ctx context.Context, c kubetest.Clients, ns, comp string, s *synthesis) error {
	patch, _ := json.Marshal(map[string]any{"status": kubetest.CompositionStatus(domain.Synthesis{
		UUID: s.UUID, Synthesized: s.At, Ready: true, Slices: s.slices,
	})})
	_, err := c.Dynamic.Resource(compositionGVR).Namespace(ns).Patch(ctx, comp, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("setting the synthesis of composition %s/%s: %w", ns, comp, err)
	}
	return nil
}

// resynthesize publishes s for an existing Composition: slices, then status.
func resynthesize(ctx context.Context, c kubetest.Clients, ns, comp string, s *synthesis) error {
	if err := publishSlices(ctx, c, ns, comp, s); err != nil {
		return err
	}
	return setStatus(ctx, c, ns, comp, s)
}

// createComposition creates an opted-in Composition and, when s is set, publishes s. It
// returns the new UID.
func createComposition(ctx context.Context, c kubetest.Clients, ns, name string, s *synthesis) (string, error) {
	return createCompositionWith(ctx, c, ns, name, map[string]string{domain.AnnotationOptIn: domain.OptInValue}, s)
}

// createCompositionWith creates a Composition with the given annotations.
func createCompositionWith(ctx context.Context, c kubetest.Clients, ns, name string, annotations map[string]string, s *synthesis) (string, error) {
	created, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: ns, Name: name, Annotations: annotations})
	if err != nil {
		return "", fmt.Errorf("creating composition %s/%s: %w", ns, name, err)
	}
	if s != nil {
		if err := resynthesize(ctx, c, ns, name, s); err != nil {
			return "", err
		}
	}
	return string(created.GetUID()), nil
}

// deleteComposition deletes the Composition (orphaning: nothing downstream is touched) and waits
// until it is gone. Its slices stay: no garbage collector runs here.
func deleteComposition(ctx context.Context, c kubetest.Clients, ns, name string) error {
	client := c.Dynamic.Resource(compositionGVR).Namespace(ns)
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting composition %s/%s: %w", ns, name, err)
	}
	return wait.PollUntilContextTimeout(ctx, poll, eventually, true, func(ctx context.Context) (bool, error) {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// recreateComposition deletes and recreates the Composition with s: a new incarnation (UID) of
// the same lineage.
func recreateComposition(ctx context.Context, c kubetest.Clients, ns, name string, s *synthesis) (string, error) {
	if err := deleteComposition(ctx, c, ns, name); err != nil {
		return "", err
	}
	return createComposition(ctx, c, ns, name, s)
}

// liveComposition reads the Composition through the adapter, live.
func liveComposition(ctx context.Context, c kubetest.Clients, ref domain.CompositionRef) (domain.Composition, error) {
	comps, err := k8s.NewCompositions(c.Dynamic, nil)
	if err != nil {
		return domain.Composition{}, err
	}
	return comps.LiveComposition(ctx, ref)
}

// readSnapshot applies design §5 to the lineage's Secrets as they are in the API server now.
func readSnapshot(ctx context.Context, c kubetest.Clients, lineage domain.Lineage) (domain.Snapshot, error) {
	store, err := k8s.NewSecretStore(c.Kube.CoreV1(), nil, inventoryNamespace)
	if err != nil {
		return domain.Snapshot{}, err
	}
	secrets, err := store.ListChunks(ctx, lineage)
	if err != nil {
		return domain.Snapshot{}, fmt.Errorf("listing chunks: %w", err)
	}
	return domain.ReadHistory(secrets, time.Now(), domain.DefaultMaxChunks).Verdict()
}

// snapshotIDs lists the identities a snapshot holds, sorted.
func snapshotIDs(s domain.Snapshot) []string {
	entries := s.Inventory().Entries()
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.ID().String()
	}
	sort.Strings(out)
	return out
}

// describeSnapshot names what design §5 reads: NoInventory, InventoryInvalid(<reason>) or the UUID.
func describeSnapshot(s domain.Snapshot, err error) string {
	if err == nil {
		return "snapshot of synthesis " + s.SynthesisUUID()
	}
	if reason, ok := domain.InvalidReasonOf(err); ok {
		return "InventoryInvalid(" + reason.String() + ")"
	}
	return err.Error()
}

// tombstoneSliceIDs reads a recovery slice: the identities it tombstones, sorted, and the
// synthesis it belongs to. Every resource must be a tombstone.
func tombstoneSliceIDs(ctx context.Context, c kubetest.Clients, ns, name string) ([]string, string, error) {
	u, err := c.Dynamic.Resource(sliceGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	return tombstonesOf(u)
}

func tombstonesOf(u *unstructured.Unstructured) ([]string, string, error) {
	uuid, _, _ := unstructured.NestedString(u.Object, "spec", "synthesisUUID")
	items, _, err := unstructured.NestedSlice(u.Object, "spec", "resources")
	if err != nil {
		return nil, "", err
	}
	out := []string{}
	for i, it := range items {
		m, _ := it.(map[string]any)
		if deleted, _ := m["deleted"].(bool); !deleted {
			return nil, "", fmt.Errorf("slice %s resource %d is not a tombstone", u.GetName(), i)
		}
		manifest, _ := m["manifest"].(string)
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(manifest), &obj); err != nil {
			return nil, "", fmt.Errorf("slice %s resource %d: %w", u.GetName(), i, err)
		}
		group := ""
		if g, _, ok := strings.Cut(obj.APIVersion, "/"); ok {
			group = g
		}
		out = append(out, domain.ResourceID{Group: group, Kind: obj.Kind, Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name}.String())
	}
	sort.Strings(out)
	return out, uuid, nil
}

// serviceOptions configures an in-process Service over the real Kubernetes adapters.
type serviceOptions struct {
	maxChunkBytes int
	// wrap decorate the adapters, e.g. to simulate a crash.
	wrapStore     func(ports.SnapshotStore) ports.SnapshotStore
	wrapSink      func(ports.TombstoneSink) ports.TombstoneSink
	wrapDecisions func(ports.DecisionWriter) ports.DecisionWriter
}

// newService wires app.Service as cmd/tombstone-recovery does, without caches: every
// Composition read is live and ListCachedChunks lists live (the Secret cache is never started).
// The deletion guard is off: the scenarios drop most resources on purpose.
func newService(t *testing.T, cfg *rest.Config, o serviceOptions) *app.Service {
	t.Helper()
	c := kubetest.NewClients(t, cfg)
	comps, err := k8s.NewCompositions(c.Dynamic, nil)
	require.NoError(t, err)
	sl, err := k8s.NewSlices(c.Dynamic)
	require.NoError(t, err)
	sink, err := k8s.NewTombstoneSink(c.Dynamic)
	require.NoError(t, err)
	store, err := k8s.NewSecretStore(c.Kube.CoreV1(), nil, inventoryNamespace)
	require.NoError(t, err)

	downstream, err := k8s.NewDownstreamObjects(c.Metadata, c.Dynamic, c.Kube.Discovery())
	require.NoError(t, err)
	deps := app.Deps{Compositions: comps, Live: comps, Slices: sl, Fleet: runFleetIndex(t, c), Store: store, Sink: sink, Decisions: comps, Downstream: downstream}
	if o.wrapStore != nil {
		deps.Store = o.wrapStore(deps.Store)
	}
	if o.wrapSink != nil {
		deps.Sink = o.wrapSink(deps.Sink)
	}
	if o.wrapDecisions != nil {
		deps.Decisions = o.wrapDecisions(deps.Decisions)
	}
	svcCfg := app.DefaultConfig()
	svcCfg.Enabled, svcCfg.ControlPlane = true, "resilience"
	svcCfg.MaxTombstoneFraction = 1
	if o.maxChunkBytes > 0 {
		svcCfg.MaxChunkBytes = o.maxChunkBytes
	}
	svc, err := app.New(svcCfg, deps)
	require.NoError(t, err)
	return svc
}

// chunkCount is how many chunks an inventory of rs takes at maxBytes: the scenarios assert
// their shapes with it, so a drift in entry sizes fails loudly instead of testing less.
func chunkCount(t *testing.T, rs []resource, maxBytes int) int {
	t.Helper()
	entries := make([]domain.Entry, len(rs))
	for i, r := range rs {
		entries[i] = r.entry()
	}
	inv, err := domain.NewInventory(entries)
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(inv, maxBytes, domain.DefaultMaxChunks)
	require.NoError(t, err)
	return len(chunks)
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
