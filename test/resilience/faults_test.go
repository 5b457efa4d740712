package resilience_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// faultKind is what the injecting transport does to one request.
type faultKind string

const (
	// fault429 answers 429 with Retry-After: 0, as API priority and fairness does.
	fault429 faultKind = "429+Retry-After"
	// fault500 answers 500 without Retry-After.
	fault500 faultKind = "500"
	// faultTimeout fails the request with a network timeout before it reaches the server.
	faultTimeout faultKind = "timeout"
	// faultLost lets the server apply the request, then fails it with a timeout: the response
	// is lost, the write is not.
	faultLost faultKind = "lost-response"
)

// fastPathList is the live list ListCachedChunks makes while the Secret cache is not synced:
// the recording fast path, which is best effort.
const fastPathList = "list secrets (managed-by+lineage)"

// siteOf names a call site: verb, resource, and for Secret lists which selector.
func siteOf(c call) string {
	if c.Verb == "list" && c.Resource == "secrets" {
		if strings.Contains(c.LabelSelector, domain.LabelManagedBy) {
			return fastPathList
		}
		return "list secrets (lineage)"
	}
	return c.key()
}

// visit is the n-th request (from 0) to a site within one armed period.
type visit struct {
	site       string
	occurrence int
}

// fault injects kind at the given occurrence of site (-1: every occurrence), at most times.
type fault struct {
	site       string
	occurrence int
	kind       faultKind
	times      int
}

// faultInjector is a RoundTripper on the rest.Config of the Service under test.
type faultInjector struct {
	mu       sync.Mutex
	armed    bool
	plan     *fault
	seen     map[string]int
	visits   []visit
	injected int
}

func (f *faultInjector) arm(plan *fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.plan, f.seen, f.visits, f.injected = true, plan, map[string]int{}, nil, 0
}

// disarm stops injecting and returns the visits and how many faults were injected.
func (f *faultInjector) disarm() ([]visit, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
	return f.visits, f.injected
}

func (f *faultInjector) count(site string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[site]
}

func (f *faultInjector) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		site := siteOf(classify(req.Method, req.URL))
		var kind faultKind
		f.mu.Lock()
		if f.armed {
			n := f.seen[site]
			f.seen[site]++
			f.visits = append(f.visits, visit{site, n})
			if p := f.plan; p != nil && p.site == site && (p.occurrence < 0 || p.occurrence == n) && f.injected < p.times {
				f.injected++
				kind = p.kind
			}
		}
		f.mu.Unlock()
		switch kind {
		case "":
			return next.RoundTrip(req)
		case faultLost:
			resp, err := next.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			return nil, injectedTimeout{}
		}
		if req.Body != nil {
			_ = req.Body.Close()
		}
		switch kind {
		case fault429:
			return statusResponse(req, http.StatusTooManyRequests, "TooManyRequests", http.Header{"Retry-After": {"0"}}), nil
		case fault500:
			return statusResponse(req, http.StatusInternalServerError, "InternalError", nil), nil
		}
		return nil, injectedTimeout{}
	})
}

// injectedTimeout is a net.Error that timed out.
type injectedTimeout struct{}

func (injectedTimeout) Error() string   { return "injected fault: i/o timeout" }
func (injectedTimeout) Timeout() bool   { return true }
func (injectedTimeout) Temporary() bool { return true }

// statusResponse is an API server error answer with a metav1.Status body.
func statusResponse(req *http.Request, code int, reason string, header http.Header) *http.Response {
	body, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": "injected fault: " + reason, "reason": reason, "code": code,
	})
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range header {
		h[k] = v
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// faultScenario: a Composition recreated (new UID, new synthesis) over a lineage whose old
// snapshot (1 chunk) is complete. Its next pass recovers and hands the tombstones to Eno
// (publish, status append, decision, forced resynthesis); Eno's next synthesis, which carries
// them, is then decided AlreadyDecided and recorded over 3 chunks: every kind of write a
// reconcile makes.
type faultScenario struct {
	c                       kubetest.Clients
	ns                      string
	ref                     domain.CompositionRef
	lineage                 domain.Lineage
	old, recreated, carried *synthesis
	tombstones              []string
	family, decision        string
}

// pass is one reconcile and, once it asked Eno for a resynthesis of the recovered synthesis,
// Eno's next synthesis (published with the admin's client, never faulted) and the reconcile it
// triggers.
func (s *faultScenario) pass(ctx context.Context, svc *app.Service) error {
	if _, err := svc.Reconcile(ctx, s.ref); err != nil {
		return err
	}
	live, err := liveComposition(ctx, s.c, s.ref)
	if err != nil {
		return err
	}
	if live.SynthesisUUID() != s.recreated.UUID || live.Annotations[domain.AnnotationForceResynthesis] != s.recreated.UUID {
		return nil
	}
	if err := resynthesize(ctx, s.c, s.ns, "web", s.carried); err != nil {
		return err
	}
	_, err = svc.Reconcile(ctx, s.ref)
	return err
}

func prepareFaultScenario(t *testing.T, ctx context.Context) *faultScenario {
	t.Helper()
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "fault")
	s := &faultScenario{
		c: c, ns: ns,
		ref:       domain.CompositionRef{Namespace: ns, Name: "web"},
		lineage:   domain.DefaultLineage(ns, "web"),
		old:       newSynthesis(numbered("old", 3)),
		recreated: newSynthesis(numbered("new", 8)),
	}
	s.recreated.PerSlice = 4 // two slices, two slice reads
	s.tombstones = minus(s.old.ids(), s.recreated.ids())
	carried := slices.Clone(s.recreated.Resources)
	for _, id := range s.tombstones {
		carried = append(carried, resource{Name: id[strings.LastIndex(id, "/")+1:], Deleted: true})
	}
	s.carried = newSynthesis(carried)
	s.carried.PerSlice = 4
	s.family = domain.RecoverySliceFamily("web", s.recreated.UUID)
	require.Equal(t, 1, chunkCount(t, s.old.Resources, crashChunkBytes))
	require.Equal(t, 3, chunkCount(t, s.recreated.Resources, crashChunkBytes))

	_, err := createComposition(ctx, c, ns, "web", s.old)
	require.NoError(t, err)
	_, err = newService(t, env.AdminConfig(), serviceOptions{maxChunkBytes: crashChunkBytes}).Reconcile(ctx, s.ref)
	require.NoError(t, err)
	snap, err := readSnapshot(ctx, c, s.lineage)
	require.NoError(t, err)
	require.Equal(t, s.old.UUID, snap.SynthesisUUID())
	_, err = recreateComposition(ctx, c, ns, "web", s.recreated)
	require.NoError(t, err)
	return s
}

// checkNoMix asserts what a fault may leave behind: the old complete snapshot, the new complete
// one, or InventoryInvalid — never a valid snapshot mixing data; a decision and a tombstone
// slice, when present, exactly right. It returns the decision annotation as found.
func (s *faultScenario) checkNoMix(t *testing.T, ctx context.Context) string {
	t.Helper()
	snap, err := readSnapshot(ctx, s.c, s.lineage)
	switch _, invalid := domain.InvalidReasonOf(err); {
	case err == nil && snap.SynthesisUUID() == s.old.UUID:
		assert.Equal(t, s.old.ids(), snapshotIDs(snap), "the old snapshot, unchanged")
	case err == nil && snap.SynthesisUUID() == s.recreated.UUID:
		t.Errorf("a synthesis decided Recovered was recorded")
	case err == nil && snap.SynthesisUUID() == s.carried.UUID:
		assert.Equal(t, s.recreated.ids(), snapshotIDs(snap), "the new snapshot, complete")
	case err == nil:
		t.Errorf("a valid snapshot of an unknown synthesis %s", snap.SynthesisUUID())
	case !invalid:
		t.Errorf("the lineage reads as %s; an old snapshot existed", describeSnapshot(snap, err))
	}

	live, err := liveComposition(ctx, s.c, s.ref)
	require.NoError(t, err)
	raw := live.Annotations[domain.AnnotationDecision]
	if d, ok := live.Decision(); ok && d.SynthesisUUID == s.carried.UUID {
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, d.Message)
		assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason)
		assert.Equal(t, s.old.UUID, d.RecoveredFrom)
	} else if ok {
		assert.Equal(t, s.recreated.UUID, d.SynthesisUUID)
		assert.Equal(t, domain.OutcomeRecovered, d.Outcome, d.Message)
		assert.Equal(t, s.old.UUID, d.SourceSynthesisUUID)
		assert.Equal(t, len(s.tombstones), d.Tombstones)
		assert.True(t, strings.HasPrefix(d.TombstoneSlice, s.family+"-"), "slice %s of the family %s", d.TombstoneSlice, s.family)
		if live.SynthesisUUID() == s.recreated.UUID {
			assert.True(t, live.NamesSlice(d.TombstoneSlice), "a Recovered decision follows the slice's naming")
		}
	} else {
		assert.Empty(t, raw, "an unparseable decision annotation")
	}
	list, err := s.c.Dynamic.Resource(sliceGVR).Namespace(s.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var family []string
	for _, sl := range list.Items {
		if strings.HasPrefix(sl.GetName(), s.family+"-") {
			family = append(family, sl.GetName())
		}
	}
	assert.LessOrEqual(t, len(family), 1, "one recovery slice however often the hand-off was retried: %v", family)
	for _, name := range family {
		got, forSynthesis, err := tombstoneSliceIDs(ctx, s.c, s.ns, name)
		require.NoError(t, err)
		assert.Equal(t, s.tombstones, got, "the tombstone slice holds exactly the orphans")
		assert.Equal(t, s.recreated.UUID, forSynthesis)
	}
	if d, ok := live.Decision(); ok && d.TombstoneSlice != "" && d.SynthesisUUID == s.recreated.UUID {
		assert.Equal(t, []string{d.TombstoneSlice}, family, "the decision names a slice that can be read")
	}
	return raw
}

// checkConverged asserts the end state of a recovered and recorded Composition.
func (s *faultScenario) checkConverged(t *testing.T, ctx context.Context) {
	t.Helper()
	s.checkNoMix(t, ctx)
	live, err := liveComposition(ctx, s.c, s.ref)
	require.NoError(t, err)
	_, ok := live.FinishedDecision()
	assert.True(t, ok, "a finished decision")
	snap, err := readSnapshot(ctx, s.c, s.lineage)
	require.NoError(t, err, describeSnapshot(snap, err))
	assert.True(t, domain.SnapshotMatches(snap, live), "the snapshot is complete for the live Composition")
	assert.Equal(t, s.carried.UUID, snap.SynthesisUUID(), "Eno's carrying synthesis is the one recorded")
	assert.Equal(t, s.recreated.ids(), snapshotIDs(snap))
}

// injectorConfig is the admin's config with the injector on its transport.
func injectorConfig(f *faultInjector) *rest.Config {
	cfg := env.AdminConfig()
	cfg.Wrap(f.wrap)
	return cfg
}

// faultCase is one fault at one call site and what is expected of it.
type faultCase struct {
	fault
	// wantErr: Reconcile surfaces the fault; otherwise client-go retried it (an informer's
	// watch too), or the product tolerates it (the best-effort fast path).
	wantErr bool
}

func (c faultCase) String() string {
	return fmt.Sprintf("%s at %s #%d", c.kind, c.site, c.occurrence)
}

// faultCases injects at every visit of the probe pass: 500 and timeouts everywhere, 429 at the
// first visit of each site, and a lost response at every write.
func faultCases(visits []visit) []faultCase {
	var out []faultCase
	for _, v := range visits {
		// The fleet index's slice informer starts on the plan's first question: its reflector
		// retries a failed watch, and the plan waits for the list.
		tolerated := v.site == fastPathList || strings.HasPrefix(v.site, "watch ")
		out = append(out,
			faultCase{fault{v.site, v.occurrence, fault500, 1}, !tolerated},
			faultCase{fault{v.site, v.occurrence, faultTimeout, 1}, !tolerated})
		if v.occurrence == 0 {
			out = append(out, faultCase{fault{v.site, v.occurrence, fault429, 1}, false})
		}
		if strings.HasPrefix(v.site, "create ") || strings.HasPrefix(v.site, "update ") || strings.HasPrefix(v.site, "patch ") {
			out = append(out, faultCase{fault{v.site, v.occurrence, faultLost, 1}, true})
		}
	}
	return out
}

// TestAPIFaultsAtEveryCallSite injects faults into the requests of one reconcile through the
// real adapters, one call site at a time, and checks that nothing partial is presented as
// complete and that the next pass converges. Each pass starts a new Service, as a restarted
// process would: the downstream reader caches discovery (design §6.3), so only a first pass
// visits it.
func TestAPIFaultsAtEveryCallSite(t *testing.T) {
	injector := &faultInjector{}
	newSvc := func(t *testing.T) *app.Service {
		return newService(t, injectorConfig(injector), serviceOptions{maxChunkBytes: crashChunkBytes})
	}
	svc := newSvc(t)

	// The probe pass lists the call sites in order.
	ctx := kubetest.Context(t, 2*time.Minute)
	probe := prepareFaultScenario(t, ctx)
	injector.arm(nil)
	err := probe.pass(ctx, svc)
	visits, _ := injector.disarm()
	require.NoError(t, err)
	probe.checkConverged(t, ctx)
	probeCount := map[string]int{}
	for _, v := range visits {
		probeCount[v.site]++
	}
	var sites []string
	for s := range probeCount {
		sites = append(sites, s)
	}
	sort.Strings(sites)
	t.Logf("a recovering reconcile and the recording one after Eno's next synthesis make %d requests at %d sites: %v", len(visits), len(sites), probeCount)
	for _, want := range []string{
		"get compositions.eno.azure.io", // the first read and the live guard before every write
		"get nonresource:/apis",         // discovery, to map a tombstone's kind (design §6.3)
		"get configmaps",                // each tombstone's object, read downstream (design §6.3)
		"get resourceslices.eno.azure.io",
		"list secrets (lineage)",
		"get secrets",
		"create secrets",
		"update secrets",
		"create resourceslices.eno.azure.io",
		"patch compositions/status.eno.azure.io", // the hand-off's commit point
		"patch compositions.eno.azure.io",        // arming, the decision, the forced resynthesis
	} {
		assert.Contains(t, sites, want, "the reconcile no longer visits %s; the fault table would miss it", want)
	}

	var summary []string
	for _, fc := range faultCases(visits) {
		t.Run(fc.String(), func(t *testing.T) {
			ctx := kubetest.Context(t, 2*time.Minute)
			s := prepareFaultScenario(t, ctx)
			svc := newSvc(t)
			plan := fc.fault
			injector.arm(&plan)
			err := s.pass(ctx, svc)
			retried := injector.count(fc.site) > probeCount[fc.site]
			_, injected := injector.disarm()
			require.Equal(t, 1, injected, "the fault was injected")

			var behaviour string
			switch {
			case err != nil:
				behaviour = "error surfaced: " + err.Error()
			case retried:
				behaviour = "retried transparently by client-go"
			default:
				behaviour = "tolerated by the product (best-effort read)"
			}
			summary = append(summary, fmt.Sprintf("%-75s %s", fc.String(), behaviour))
			if fc.wantErr {
				require.Error(t, err, "the fault must reach the caller, whose queue retries with backoff")
			} else {
				require.NoError(t, err)
			}
			if fc.kind == fault429 {
				assert.True(t, retried, "client-go retries a 429 with Retry-After")
			}
			before := s.checkNoMix(t, ctx)

			// The retry (the controller's rate-limited requeue) converges in one pass.
			injector.arm(nil)
			err = s.pass(ctx, svc)
			injector.disarm()
			require.NoError(t, err)
			s.checkConverged(t, ctx)
			if d, ok := parseDecision(before); ok {
				live, err := liveComposition(ctx, s.c, s.ref)
				require.NoError(t, err)
				if now, _ := live.Decision(); now.SynthesisUUID == d.SynthesisUUID {
					assert.Equal(t, before, live.Annotations[domain.AnnotationDecision], "a written decision is never rewritten")
				}
			}
		})
	}
	t.Logf("fault behaviour by call site:\n%s", strings.Join(summary, "\n"))
}

func parseDecision(raw string) (domain.Decision, bool) {
	d, err := domain.ParseDecision(raw)
	return d, err == nil
}

// observedQueue is the controller's real client-go queue, watched: it records the requeue count
// each AddRateLimited leaves and each Forget.
type observedQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	mu       sync.Mutex
	requeues []int
	forgets  int
}

func (q *observedQueue) AddRateLimited(req reconcile.Request) {
	q.TypedRateLimitingInterface.AddRateLimited(req)
	q.mu.Lock()
	q.requeues = append(q.requeues, q.TypedRateLimitingInterface.NumRequeues(req))
	q.mu.Unlock()
}

func (q *observedQueue) Forget(req reconcile.Request) {
	q.TypedRateLimitingInterface.Forget(req)
	q.mu.Lock()
	q.forgets++
	q.mu.Unlock()
}

func (q *observedQueue) state() ([]int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.requeues), q.forgets
}

// TestControllerRequeuesAFailingItemWithBackoff runs app's Reconcile in a controller-runtime
// controller, as runnable does, over a real rate-limited workqueue while the API server fails
// three Secret updates in a row.
func TestControllerRequeuesAFailingItemWithBackoff(t *testing.T) {
	ctx := kubetest.Context(t, 2*time.Minute)
	s := prepareFaultScenario(t, ctx)
	injector := &faultInjector{}
	svc := newService(t, injectorConfig(injector), serviceOptions{maxChunkBytes: crashChunkBytes})
	queue := &observedQueue{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, time.Second))}
	skip := true
	ctl, err := controller.NewTypedUnmanaged("requeue-test", controller.TypedOptions[reconcile.Request]{
		SkipNameValidation: &skip,
		Reconciler: reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			res, err := svc.Reconcile(ctx, domain.CompositionRef{Namespace: req.Namespace, Name: req.Name})
			return reconcile.Result{RequeueAfter: res.RequeueAfter}, err
		}),
		NewQueue: func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return queue
		},
	})
	require.NoError(t, err)
	require.NoError(t, ctl.Watch(source.TypedFunc[reconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.ref.Namespace, Name: s.ref.Name}})
		return nil
	})))
	// Recovery hands off first, and Eno's next synthesis carries the tombstones: its recording
	// is the pass whose Secret updates fail.
	_, err = svc.Reconcile(ctx, s.ref)
	require.NoError(t, err)
	require.NoError(t, resynthesize(ctx, s.c, s.ns, "web", s.carried))

	injector.arm(&fault{site: "update secrets", occurrence: -1, kind: fault500, times: 3})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); assert.NoError(t, ctl.Start(runCtx)) }()

	require.Eventually(t, func() bool {
		_, forgets := queue.state()
		return forgets > 0
	}, eventually, poll, "the item succeeded and was forgotten")
	stop()
	<-done
	_, injected := injector.disarm()

	requeues, forgets := queue.state()
	assert.Equal(t, 3, injected)
	assert.Equal(t, []int{1, 2, 3}, requeues, "each failure requeued the item with a growing backoff count")
	assert.GreaterOrEqual(t, forgets, 1)
	assert.Zero(t, queue.NumRequeues(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.ref.Namespace, Name: s.ref.Name}}), "success resets the backoff")
	s.checkConverged(t, ctx)
}
