package runnable_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/runnable"
)

const (
	eventually = 60 * time.Second
	poll       = 100 * time.Millisecond
	// Short Lease timings keep the hand-overs quick; client-go requires
	// LeaseDuration > RenewDeadline > 1.2 × RetryPeriod.
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// writeLog records the writes one replica sends, Lease traffic aside (every candidate tries to
// create or take the Lease; only the leader may write anything else).
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) RoundTrip(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead && !strings.Contains(req.URL.Path, "/apis/coordination.k8s.io/") {
		w.mu.Lock()
		w.writes = append(w.writes, req.Method+" "+req.URL.Path)
		w.mu.Unlock()
	}
	return next.RoundTrip(req)
}

func (w *writeLog) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// replica is one controller as eno-reconciler runs it on one of its replicas.
type replica struct {
	name   string
	ctl    *runnable.Controller
	writes *writeLog
	cancel context.CancelFunc
	done   chan error
}

// startReplica starts a controller in scope namespace with the package's defaults for
// eno-reconciler (its own Lease), the short Lease timings, and a write log.
func startReplica(t *testing.T, name, namespace, inventory string, stopOnLoss bool) *replica {
	t.Helper()
	r := &replica{name: name, writes: &writeLog{}, done: make(chan error, 1)}
	cfg := env.AdminConfig()
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) { return r.writes.RoundTrip(next, req) })
	})
	ctl := runnable.New(runnable.Options{
		ControlPlane:         cfg,
		CompositionNamespace: namespace,
		Enabled:              true,
		InventoryNamespace:   inventory,
		LeaderElection: runnable.LeaderElection{
			Namespace:     namespace,
			Identity:      name,
			LeaseDuration: leaseDuration,
			RenewDeadline: renewDeadline,
			RetryPeriod:   retryPeriod,
			StopOnLoss:    stopOnLoss,
		},
		Logger: testr.New(t).WithValues("replica", name),
	})
	require.NoError(t, ctl.Err())
	require.False(t, ctl.NeedLeaderElection(), "the manager starts it on every replica; it elects by itself")
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.ctl = cancel, ctl
	go func() { r.done <- ctl.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the replica's context and waits for Start to return; it returns Start's error.
func (r *replica) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
			return err
		}
		return nil
	case <-time.After(eventually):
		t.Fatalf("replica %s: Start did not return within %s of its context ending", r.name, eventually)
		return nil
	}
}

// holder is the Lease's holder, "" when nobody holds it.
func holder(ctx context.Context, c kubetest.Clients, namespace string) (string, error) {
	lease, err := c.Kube.CoordinationV1().Leases(namespace).Get(ctx, runnable.DefaultLeaseName(namespace, nil), metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return deref(lease.Spec.HolderIdentity), nil
}

func waitForHolder(t *testing.T, c kubetest.Clients, namespace string, want ...string) string {
	t.Helper()
	var got string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var err error
		got, err = holder(t.Context(), c, namespace)
		require.NoError(ct, err)
		assert.Contains(ct, want, got)
	}, eventually, poll, "Lease holder")
	return got
}

// createRecordable creates an opted-in Composition with a ready synthesis of one ConfigMap, which
// the leader decides on (NoInventory) and records.
func createRecordable(t *testing.T, c kubetest.Clients, namespace, name string) {
	t.Helper()
	ctx := t.Context()
	syn := string(uuid.NewUUID())
	slice := domain.ResourceSlice{Namespace: namespace, Name: name + "-" + syn[:8], SynthesisUUID: syn, Resources: []domain.SliceResource{{
		Manifest: fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q}}`, name, namespace),
	}}}
	_, err := kubetest.CreateSlice(ctx, c.Dynamic, slice)
	require.NoError(t, err)
	_, err = kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{
		Namespace: namespace, Name: name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue},
		Synthesis:   &domain.Synthesis{UUID: syn, Synthesized: time.Now().Add(-time.Minute), Ready: true, Slices: []string{slice.Name}},
	})
	require.NoError(t, err)
}

// waitForRecording waits for the Composition's decision and its snapshot's first chunk.
func waitForRecording(t *testing.T, c kubetest.Clients, namespace, inventory, name string) {
	t.Helper()
	lineage := domain.DefaultLineage(namespace, name)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		comp, err := c.Dynamic.Resource(kubetest.CompositionResource).Namespace(namespace).Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(ct, err)
		assert.Contains(ct, comp.GetAnnotations(), domain.AnnotationDecision)
		_, err = c.Kube.CoreV1().Secrets(inventory).Get(t.Context(), domain.ChunkName(name, lineage, 0), metav1.GetOptions{})
		assert.NoError(ct, err)
	}, eventually, poll, "decision and snapshot of %s/%s", namespace, name)
}

// TestOneReplicaReconcilesAtATime starts two controllers as two eno-reconciler replicas of one
// shard start them (same scope, default leader election, NeedLeaderElection false): only the
// Lease holder writes; when it stops it releases the Lease, the other takes over, and the
// stopped one writes nothing more.
func TestOneReplicaReconcilesAtATime(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "shard")
	inventory := c.NewNamespace(t, "inventory")
	replicas := map[string]*replica{
		"replica-a": startReplica(t, "replica-a", ns, inventory, false),
		"replica-b": startReplica(t, "replica-b", ns, inventory, false),
	}

	createRecordable(t, c, ns, "first")
	leaderName := waitForHolder(t, c, ns, "replica-a", "replica-b")
	waitForRecording(t, c, ns, inventory, "first")
	leader, follower := replicas[leaderName], replicas["replica-a"]
	if leaderName == "replica-a" {
		follower = replicas["replica-b"]
	}
	// The follower's caches are synced and it sees the same Compositions, yet it does not write.
	require.Eventually(t, func() bool { return follower.ctl.ReadyzCheck(nil) == nil }, eventually, poll, "the follower's caches sync")
	time.Sleep(2 * retryPeriod)
	assert.NotEmpty(t, leader.writes.list(), "the leader records")
	assert.Empty(t, follower.writes.list(), "the follower must not write while the other holds the Lease")
	h, err := holder(t.Context(), c, ns)
	require.NoError(t, err)
	assert.Equal(t, leaderName, h, "leadership did not move while both ran")

	// The leader stops (a rollout): it drains, releases the Lease, and the follower takes over.
	require.NoError(t, leader.stop(t))
	stoppedWrites := len(leader.writes.list())
	waitForHolder(t, c, ns, follower.name)
	createRecordable(t, c, ns, "second")
	waitForRecording(t, c, ns, inventory, "second")
	assert.NotEmpty(t, follower.writes.list(), "the new leader records")
	assert.Len(t, leader.writes.list(), stoppedWrites, "a stopped replica writes nothing")
	require.NoError(t, follower.stop(t))
	h, err = holder(t.Context(), c, ns)
	require.NoError(t, err)
	assert.Empty(t, h, "the last replica released the Lease on stopping")
}

// steal makes someone else hold the Lease, as a partitioned leader would find it.
func steal(t *testing.T, c kubetest.Clients, namespace string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		leases := c.Kube.CoordinationV1().Leases(namespace)
		lease, err := leases.Get(t.Context(), runnable.DefaultLeaseName(namespace, nil), metav1.GetOptions{})
		require.NoError(ct, err)
		lease.Spec.HolderIdentity = to("someone-else")
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		lease.Spec.LeaseDurationSeconds = to(int32(leaseDuration / time.Second))
		_, err = leases.Update(t.Context(), lease, metav1.UpdateOptions{})
		require.False(ct, apierrors.IsConflict(err), "retry on conflict")
		require.NoError(ct, err)
	}, eventually, poll)
}

// TestLostLease: inside eno-reconciler a lost Lease ends the term, not the process — the
// controller drains and campaigns again; the standalone binary's StopOnLoss returns instead.
func TestLostLease(t *testing.T) {
	c := env.AdminClients(t)

	t.Run("campaigns again", func(t *testing.T) {
		ns := c.NewNamespace(t, "lost")
		inventory := c.NewNamespace(t, "inventory")
		r := startReplica(t, "replica-a", ns, inventory, false)
		waitForHolder(t, c, ns, "replica-a")
		steal(t, c, ns)
		// The thief never renews: once its Lease expires the replica takes it back and reconciles.
		waitForHolder(t, c, ns, "someone-else")
		waitForHolder(t, c, ns, "replica-a")
		select {
		case err := <-r.done:
			t.Fatalf("Start returned after a lost Lease: %v", err)
		default:
		}
		createRecordable(t, c, ns, "after")
		waitForRecording(t, c, ns, inventory, "after")
		require.NoError(t, r.stop(t))
	})

	t.Run("StopOnLoss returns", func(t *testing.T) {
		ns := c.NewNamespace(t, "stop")
		inventory := c.NewNamespace(t, "inventory")
		r := startReplica(t, "replica-a", ns, inventory, true)
		waitForHolder(t, c, ns, "replica-a")
		steal(t, c, ns)
		select {
		case err := <-r.done:
			close(r.done)
			assert.True(t, errors.Is(err, runnable.ErrLeadershipLost), "Start returned %v", err)
		case <-time.After(eventually):
			t.Fatal("Start did not return after the Lease was lost")
		}
	})
}

func to[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// When the host elects (eno-reconciler --leader-election), the controller follows it: the
// manager starts it on the leader only (NeedLeaderElection), and it reconciles at once with no
// Lease of its own.
func TestFollowsTheHostsLeaderElection(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "host-elects")
	inventory := c.NewNamespace(t, "inventory")
	ctl := runnable.New(runnable.Options{
		ControlPlane:         env.AdminConfig(),
		CompositionNamespace: ns,
		Enabled:              true,
		InventoryNamespace:   inventory,
		LeaderElection:       runnable.LeaderElection{HostElects: true, Namespace: ns},
		Logger:               testr.New(t),
	})
	require.NoError(t, ctl.Err())
	require.True(t, ctl.NeedLeaderElection(), "the host's leader starts it; a follower starts nothing of it")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	createRecordable(t, c, ns, "first")
	waitForRecording(t, c, ns, inventory, "first")
	leases, err := c.Kube.CoordinationV1().Leases(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, leases.Items, "no Lease of its own")
}
