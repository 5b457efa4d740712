package runnable_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
	"github.com/Azure/eno-tombstone-recovery/runnable"
)

const (
	eventually = 60 * time.Second
	poll       = 100 * time.Millisecond
)

// logBuffer is a logger that keeps every line, safe to use after the test has ended.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) logger(name string) logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintf(&l.buf, "%s %s %s\n", name, prefix, args)
	}, funcr.Options{Verbosity: 1})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// requestLog records the requests one replica sends, Lease traffic aside.
type requestLog struct {
	mu       sync.Mutex
	requests []string
}

func (w *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if !strings.Contains(req.URL.Path, "/apis/coordination.k8s.io/") && !strings.Contains(req.URL.Path, "/events") {
				w.mu.Lock()
				w.requests = append(w.requests, req.Method+" "+req.URL.RequestURI())
				w.mu.Unlock()
			}
			return next.RoundTrip(req)
		})
	})
	return cfg
}

func (w *requestLog) writes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.requests {
		if !strings.HasPrefix(r, http.MethodGet) {
			out = append(out, r)
		}
	}
	return out
}

func (w *requestLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.requests...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// host is a controller-runtime manager standing in for eno-reconciler, with a controller of
// its own on ConfigMaps that counts its reconciles.
type host struct {
	mgr        manager.Manager
	reconciled atomic.Int64
	done       chan error
	cancel     context.CancelFunc
}

// newHost builds a manager on cfg that elects (a Lease in ns) or not, with short Lease timings;
// scheme nil is client-go's.
func newHost(t *testing.T, cfg *rest.Config, ns string, elect bool, log logr.Logger, scheme ...*runtime.Scheme) *host {
	t.Helper()
	lease, renew, retry := 4*time.Second, 3*time.Second, 500*time.Millisecond
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        append(scheme, nil)[0],
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                elect,
		LeaderElectionID:              "host",
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		Controller:                    config.Controller{SkipNameValidation: &skip},
	})
	require.NoError(t, err)
	h := &host{mgr: mgr, done: make(chan error, 1)}
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("host-configmaps").
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			h.reconciled.Add(1)
			return reconcile.Result{}, nil
		}))
	require.NoError(t, err)
	return h
}

func (h *host) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.mgr.Start(ctx) }()
	t.Cleanup(func() { require.NoError(t, h.stop()) })
}

// stop ends the manager and returns what Start returned; later calls return nil.
func (h *host) stop() error {
	h.cancel()
	select {
	case err, ok := <-h.done:
		if ok {
			close(h.done)
		}
		return err
	case <-time.After(eventually):
		return fmt.Errorf("the manager did not stop within %s", eventually)
	}
}

// requireRunning fails if the manager's Start has returned.
func (h *host) requireRunning(t *testing.T) {
	t.Helper()
	select {
	case err := <-h.done:
		t.Fatalf("the host manager stopped: %v", err)
	default:
	}
}

// requireHostReconciles creates a ConfigMap in ns and waits for the host's own controller to
// reconcile it.
func (h *host) requireHostReconciles(t *testing.T, c kubetest.Clients, ns string) {
	t.Helper()
	before := h.reconciled.Load()
	_, err := c.Kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "host-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.reconciled.Load() > before }, eventually, poll, "the host's own controller reconciles")
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

// guestOptions are the options of a guest in scope ns that records into inventory.
func guestOptions(ns, inventory string, log logr.Logger) runnable.Options {
	o := runnable.DefaultOptions()
	o.Scope.Namespace, o.Enabled, o.InventoryNamespace = ns, true, inventory
	o.HostElects, o.Logger = true, log
	return o
}

// TestOnlyTheHostsLeaderRuns starts two hosts that elect, each with the guest: only the leader
// reconciles and writes, and the follower sends no request at all for the controller (no cache,
// no downstream cluster). When the leader stops, the other takes over.
func TestOnlyTheHostsLeaderRuns(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "shard")
	inventory := c.NewNamespace(t, "inventory")
	var logs logBuffer
	type replica struct {
		h    *host
		reqs *requestLog
	}
	replicas := map[string]*replica{}
	for _, name := range []string{"a", "b"} {
		r := &replica{reqs: &requestLog{}}
		r.h = newHost(t, env.AdminConfig(), ns, true, logs.logger(name))
		_, err := runnable.SetupWithManager(r.h.mgr, r.reqs.wrap(env.AdminConfig()), guestOptions(ns, inventory, logs.logger(name)))
		require.NoError(t, err)
		r.h.start(t)
		replicas[name] = r
	}
	createRecordable(t, c, ns, "first")
	waitForRecording(t, c, ns, inventory, "first")
	var leader, follower *replica
	for _, r := range replicas {
		select {
		case <-r.h.mgr.Elected():
			leader = r
		default:
			follower = r
		}
	}
	require.NotNil(t, leader)
	require.NotNil(t, follower, "one host leads")
	assert.NotEmpty(t, leader.reqs.writes(), "the leader records")
	assert.Empty(t, follower.reqs.all(), "the follower's guest sends nothing downstream")
	// Downstream, the only watch is of our Secrets: objects are read live by identity, so no
	// informer starts per kind read.
	for _, r := range leader.reqs.all() {
		if strings.Contains(r, "watch=true") {
			assert.Contains(t, r, "/api/v1/namespaces/"+inventory+"/secrets?", "a downstream watch other than our Secrets'")
		}
	}

	require.NoError(t, leader.h.stop())
	createRecordable(t, c, ns, "second")
	waitForRecording(t, c, ns, inventory, "second")
	assert.NotEmpty(t, follower.reqs.writes(), "the new leader records")
}

// TestGuestFailuresLeaveTheHostRunning: a downstream whose Secrets the guest may not list, or
// that does not answer, never lets the guest's caches sync. The guest's cache logs and retries
// with backoff, its controller waits, unready; the host manager keeps running and its own
// controller keeps working. Once the identity may read and write Secrets, the guest recovers
// without a restart of the host.
func TestGuestFailuresLeaveTheHostRunning(t *testing.T) {
	c := env.AdminClients(t)
	for _, tc := range []struct {
		name       string
		downstream *rest.Config
		fixable    bool
	}{
		{"secrets list forbidden", env.UserConfig(noSecrets), true},
		{"downstream unreachable", &rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := c.NewNamespace(t, "shard")
			inventory := c.NewNamespace(t, "inventory")
			var logs logBuffer
			h := newHost(t, env.AdminConfig(), ns, true, logs.logger("host"))
			g, err := runnable.SetupWithManager(h.mgr, tc.downstream, guestOptions(ns, inventory, logs.logger("guest")))
			require.NoError(t, err)
			h.start(t)
			createRecordable(t, c, ns, "first")

			if tc.fixable { // a forbidden list fails at once; an unreachable one only after client-go's retries
				require.Eventually(t, func() bool {
					return strings.Count(logs.String(), "the secrets cache cannot list or watch; retrying") >= 2
				}, eventually, poll, "the guest retries: %s", &logs)
			}
			require.Eventually(t, func() bool { return strings.Contains(logs.String(), "Starting EventSource") }, eventually, poll, "the guest starts")
			select { // the manager closes Elected once all its leader's runnables have started
			case <-h.mgr.Elected():
			case <-time.After(eventually):
				t.Fatal("the host never led")
			}
			require.Error(t, g.ReadyzCheck(nil), "the leader's guest is not ready")
			h.requireRunning(t)
			h.requireHostReconciles(t, c, ns)
			if !tc.fixable {
				return
			}
			grantSecrets(t, c, inventory, noSecrets)
			waitForRecording(t, c, ns, inventory, "first")
			require.NoError(t, g.ReadyzCheck(nil))
			h.requireRunning(t)
		})
	}
}

// grantSecrets lets user read and write the Secrets of ns, as the guest needs.
func grantSecrets(t *testing.T, c kubetest.Clients, ns, user string) {
	t.Helper()
	rbac := c.Kube.RbacV1()
	_, err := rbac.Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "inventory"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "inventory"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "inventory"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// TestRefusesWithoutLeaderElection: in a host that does not elect, the guest logs why, naming
// --leader-election, and starts nothing; the host runs as usual.
func TestRefusesWithoutLeaderElection(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "shard")
	inventory := c.NewNamespace(t, "inventory")
	var logs logBuffer
	reqs := &requestLog{}
	h := newHost(t, env.AdminConfig(), ns, false, logs.logger("host"))
	opts := guestOptions(ns, inventory, logs.logger("guest"))
	opts.HostElects = false
	_, err := runnable.SetupWithManager(h.mgr, reqs.wrap(env.AdminConfig()), opts)
	require.NoError(t, err)
	h.start(t)
	createRecordable(t, c, ns, "first")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "--leader-election") }, eventually, poll)
	h.requireHostReconciles(t, c, ns)
	h.requireRunning(t)
	assert.Empty(t, reqs.all(), "the refused guest sends nothing")
	comp, err := c.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).Get(t.Context(), "first", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, comp.GetAnnotations(), domain.AnnotationDecision, "nothing reconciled the Composition")
}

// TestEveryReplicaRunsWithoutElection: the standalone binary with --leader-elect=false runs
// the controller on its manager, which does not elect.
func TestEveryReplicaRunsWithoutElection(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "shard")
	inventory := c.NewNamespace(t, "inventory")
	var logs logBuffer
	h := newHost(t, env.AdminConfig(), ns, false, logs.logger("host"))
	opts := guestOptions(ns, inventory, logs.logger("guest"))
	opts.HostElects, opts.EveryReplica = false, true
	g, err := runnable.SetupWithManager(h.mgr, nil, opts)
	require.NoError(t, err)
	require.Error(t, g.ReadyzCheck(nil), "not ready before the caches sync")
	h.start(t)
	createRecordable(t, c, ns, "first")
	waitForRecording(t, c, ns, inventory, "first")
	require.NoError(t, g.ReadyzCheck(nil))
}

// typedComposition and its list stand in for Eno's types, which eno-reconciler's scheme knows.
type typedComposition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              map[string]any `json:"spec,omitempty"`
	Status            map[string]any `json:"status,omitempty"`
}

type typedCompositionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []typedComposition `json:"items"`
}

func (c *typedComposition) DeepCopyObject() runtime.Object {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec, out.Status = runtime.DeepCopyJSON(c.Spec), runtime.DeepCopyJSON(c.Status)
	return &out
}

func (l *typedCompositionList) DeepCopyObject() runtime.Object {
	out := *l
	out.Items = make([]typedComposition, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*typedComposition)
	}
	return &out
}

// TestFollowerStartsNoCompositionInformer: in hosts whose scheme knows Eno's Composition (the
// guest reads the host's cache, which runs on every replica), only the leader lists and watches
// Compositions; a follower's host sends no request for them.
func TestFollowerStartsNoCompositionInformer(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "typed")
	inventory := c.NewNamespace(t, "inventory")
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	gv := kubetest.CompositionResource.GroupVersion()
	scheme.AddKnownTypeWithName(gv.WithKind("Composition"), &typedComposition{})
	scheme.AddKnownTypeWithName(gv.WithKind("CompositionList"), &typedCompositionList{})
	metav1.AddToGroupVersion(scheme, gv)
	var logs logBuffer
	type replica struct {
		h     *host
		comps atomic.Int64 // the host's requests for Compositions
	}
	var replicas []*replica
	for _, name := range []string{"a", "b"} {
		r := &replica{}
		cfg := env.AdminConfig()
		cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				if strings.HasSuffix(req.URL.Path, "/compositions") {
					r.comps.Add(1)
				}
				return next.RoundTrip(req)
			})
		})
		r.h = newHost(t, cfg, ns, true, logs.logger(name), scheme)
		_, err := runnable.SetupWithManager(r.h.mgr, env.AdminConfig(), guestOptions(ns, inventory, logs.logger(name)))
		require.NoError(t, err)
		r.h.start(t)
		replicas = append(replicas, r)
	}
	createRecordable(t, c, ns, "first")
	waitForRecording(t, c, ns, inventory, "first")
	led := 0
	for _, r := range replicas {
		select {
		case <-r.h.mgr.Elected():
			led++
			assert.NotZero(t, r.comps.Load(), "the leader's guest reads Compositions through its host's cache")
		default:
			assert.Zero(t, r.comps.Load(), "a follower's host lists or watches Compositions for its guest")
		}
	}
	require.Equal(t, 1, led, "one host leads")
}
