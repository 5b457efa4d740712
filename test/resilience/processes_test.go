package resilience_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// apiProxy sits between the controller processes and the API server and records every request
// as the API server receives it: method, path, body of writes, and the answer's status.
type apiProxy struct {
	srv      *httptest.Server
	upstream *http.Transport
	caPEM    []byte
	mu       sync.Mutex
	calls    []call
}

type callIndex struct{}

func startProxy(t *testing.T) *apiProxy {
	t.Helper()
	admin := env.AdminConfig()
	target, err := url.Parse(admin.Host)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(admin.TLSClientConfig.CAData))
	p := &apiProxy{upstream: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
	rp := &httputil.ReverseProxy{
		// The client's own credentials go through unchanged: the API server authorizes the
		// controller's identity, not the proxy's.
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     p.upstream,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			if i, ok := resp.Request.Context().Value(callIndex{}).(int); ok {
				p.mu.Lock()
				p.calls[i].Status = resp.StatusCode
				p.mu.Unlock()
			}
			return nil
		},
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := classify(r.Method, r.URL)
		if r.Method != http.MethodGet && r.Method != http.MethodDelete {
			body, err := readBody(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			c.Body = body
		}
		p.mu.Lock()
		p.calls = append(p.calls, c)
		i := len(p.calls) - 1
		p.mu.Unlock()
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callIndex{}, i)))
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	t.Cleanup(p.close)
	return p
}

func (p *apiProxy) close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
	p.upstream.CloseIdleConnections()
}

func (p *apiProxy) all() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls...)
}

// controllerProcess is one `tombstone-recovery run`, its output in a file.
type controllerProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func startControllerProcess(t *testing.T, name string, args ...string) *controllerProcess {
	t.Helper()
	p := &controllerProcess{name: name, logPath: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.logPath)
	require.NoError(t, err)
	defer out.Close() // the child has its own descriptor
	p.cmd = exec.Command(controllerBinary, append([]string{"run"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = kubetest.ChildSysProcAttr()
	p.cmd.Env = kubetest.ChildEnv()
	require.NoError(t, p.cmd.Start())
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	// A test that fails before stopping it still ends the process, by its PID.
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *controllerProcess) logs() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

func (p *controllerProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit code; a process that does not drain in time is
// killed and the test fails.
func (p *controllerProcess) stop(t *testing.T) int {
	t.Helper()
	if !p.exited() {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	}
	select {
	case <-p.done:
	case <-time.After(eventually):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not exit within %s of SIGTERM", p.name, eventually)
	}
	var exit *exec.ExitError
	if errors.As(p.waitErr, &exit) {
		return exit.ExitCode()
	}
	if p.waitErr != nil {
		t.Errorf("%s: %v", p.name, p.waitErr)
		return -1
	}
	return 0
}

// decisionTransition is one change of a Composition's decision annotation seen by the watch,
// with the synthesis current in the same object version.
type decisionTransition struct {
	uid, name       string
	value           string
	statusSynthesis string
	resourceVersion string
}

// decisionWatch records every change of the decision annotation of the Compositions of a
// namespace, resuming across watch restarts, so no intermediate value is missed.
type decisionWatch struct {
	rw          *watchtools.RetryWatcher
	done        chan struct{}
	mu          sync.Mutex
	last        map[string]string
	transitions []decisionTransition
	problems    []string
}

func watchDecisions(t *testing.T, ctx context.Context, c kubetest.Clients, ns string) *decisionWatch {
	t.Helper()
	client := c.Dynamic.Resource(compositionGVR).Namespace(ns)
	list, err := client.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "the watch starts before any Composition exists")
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	})
	require.NoError(t, err)
	w := &decisionWatch{rw: rw, done: make(chan struct{}), last: map[string]string{}}
	go func() {
		defer close(w.done)
		for ev := range rw.ResultChan() {
			w.observe(ev)
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *decisionWatch) observe(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		w.problems = append(w.problems, fmt.Sprintf("watch event %s carries a %T", ev.Type, ev.Object))
		return
	}
	if ev.Type == watch.Deleted {
		return
	}
	uid := string(u.GetUID())
	value := u.GetAnnotations()[domain.AnnotationDecision]
	if value == w.last[uid] {
		return
	}
	w.last[uid] = value
	syn, _, _ := unstructured.NestedString(u.Object, "status", "currentSynthesis", "uuid")
	w.transitions = append(w.transitions, decisionTransition{uid: uid, name: u.GetName(), value: value, statusSynthesis: syn, resourceVersion: u.GetResourceVersion()})
}

func (w *decisionWatch) stop() {
	w.rw.Stop()
	<-w.done
}

func (w *decisionWatch) result() ([]decisionTransition, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]decisionTransition(nil), w.transitions...), append([]string(nil), w.problems...)
}

// churnComposition is the driver's view of one Composition.
type churnComposition struct {
	name    string
	uid     string
	current *synthesis
}

// TestTwoControllerProcessesWhileSynthesesChange runs two real controller processes without
// leader election against one API server, changes syntheses (and incarnations) underneath them,
// then checks the end state and every decision they wrote along the way.
func TestTwoControllerProcessesWhileSynthesesChange(t *testing.T) {
	const (
		compositions  = 4
		rounds        = 6
		recreateRound = 3
		maxChunkBytes = 600
	)
	ctx := kubetest.Context(t, 3*time.Minute)
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "racing")
	marker := newMarker(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))

	// Every synthesis the driver ever published, by UUID.
	var synMu sync.Mutex
	syntheses := map[string]*synthesis{}
	pool := make([]resource, 16)
	for i := range pool {
		pool[i] = resource{Name: fmt.Sprintf("r-%02d", i), Labels: markerLabels(marker)}
	}
	randomSynthesis := func() *synthesis {
		picked := []resource{{Name: "shared", Labels: markerLabels(marker)}}
		for _, r := range pool {
			if rng.IntN(3) > 0 {
				picked = append(picked, r)
			}
		}
		s := newSynthesis(picked)
		s.PerSlice = 5
		synMu.Lock()
		syntheses[s.UUID] = s
		synMu.Unlock()
		return s
	}

	register := func(s *synthesis) {
		synMu.Lock()
		syntheses[s.UUID] = s
		synMu.Unlock()
	}

	proxy := startProxy(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, kubetest.WriteKubeconfig(kubeconfig, proxy.srv.URL, proxy.caPEM, controllerUser, env.UserConfig(controllerUser).BearerToken))
	decisions := watchDecisions(t, ctx, c, ns)
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--composition-namespace=" + ns,
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0",
		fmt.Sprintf("--max-chunk-bytes=%d", maxChunkBytes),
		"--max-tombstone-fraction=1",
		"--workers=2",
		"-v=2",
	}
	procs := []*controllerProcess{startControllerProcess(t, "controller-a", args...), startControllerProcess(t, "controller-b", args...)}
	for _, p := range procs {
		require.Eventually(t, func() bool { return strings.Contains(p.logs(), "caches synced") || p.exited() }, eventually, poll)
		require.False(t, p.exited(), "%s exited early:\n%s", p.name, p.logs())
	}

	// Churn: new syntheses land while the processes are busy with the previous ones.
	comps := make([]*churnComposition, compositions)
	for i := range comps {
		comps[i] = &churnComposition{name: fmt.Sprintf("app-%d", i), current: randomSynthesis()}
		uid, err := createComposition(ctx, c, ns, comps[i].name, comps[i].current)
		require.NoError(t, err)
		comps[i].uid = uid
	}
	for round := 1; round <= rounds; round++ {
		for _, i := range rng.Perm(compositions) {
			cc := comps[i]
			next := randomSynthesis()
			if round == recreateRound && i%2 == 0 {
				uid, err := recreateComposition(ctx, c, ns, cc.name, next)
				require.NoError(t, err)
				cc.uid, cc.current = uid, next
				// Tombstones are published before the decision; a synthesis replaced in between
				// would leave a slice no decision names (by design, and harmless: it is not the
				// current synthesis). Let the recreated synthesis be decided first.
				waitForDecision(t, ctx, c, ns, cc)
				continue
			}
			require.NoError(t, resynthesize(ctx, c, ns, cc.name, next))
			cc.current = next
			time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond)
		}
	}
	quiesce(t, ctx, c, ns, comps, register)

	// Every Composition recreated with a synthesis that drops resources: recovery from the
	// complete snapshot of the previous incarnation.
	previous := map[string]*synthesis{}
	for _, cc := range comps {
		previous[cc.name] = cc.current
		kept := []resource{}
		for j, r := range cc.current.Resources {
			if r.Name == "shared" || j%3 != 1 {
				kept = append(kept, r)
			}
		}
		next := newSynthesis(append(kept, resource{Name: "final-" + cc.name, Labels: markerLabels(marker)}))
		next.PerSlice = 5
		synMu.Lock()
		syntheses[next.UUID] = next
		synMu.Unlock()
		uid, err := recreateComposition(ctx, c, ns, cc.name, next)
		require.NoError(t, err)
		cc.uid, cc.current = uid, next
	}
	quiesce(t, ctx, c, ns, comps, register)

	for _, p := range procs {
		assert.Equal(t, 0, p.stop(t), "%s exits 0 on SIGTERM", p.name)
	}
	decisions.stop()
	transitions, problems := decisions.result()
	assert.Empty(t, problems)

	// The end state, once more with both processes gone.
	var chunks [][]byte
	for _, cc := range comps {
		live, err := liveComposition(ctx, c, domain.CompositionRef{Namespace: ns, Name: cc.name})
		require.NoError(t, err)
		d, ok := live.FinishedDecision()
		require.True(t, ok, "%s has a finished decision", cc.name)
		// Eno's synthesis carrying the tombstones decides nothing new.
		assert.Equal(t, domain.OutcomeNothingToRecover, d.Outcome, "%s: %s", cc.name, d.Message)
		assert.Equal(t, domain.ReasonAlreadyDecided, d.Reason, "%s: %s", cc.name, d.Message)
		assert.Equal(t, previous[cc.name].UUID, d.RecoveredFrom, "%s recovered from its previous incarnation's last snapshot", cc.name)
		snap, err := readSnapshot(ctx, c, domain.DefaultLineage(ns, cc.name))
		require.NoError(t, err, describeSnapshot(snap, err))
		assert.True(t, domain.SnapshotMatches(snap, live))
		assert.Equal(t, cc.current.ids(), snapshotIDs(snap))
		for _, ch := range snap.Chunks() {
			chunks = append(chunks, ch.Data[domain.SecretDataKey])
		}
	}

	// Every decision, as the watch saw it being written.
	type decided struct{ uid, synthesis string }
	finished := map[decided][]string{}
	recovered := map[decided]domain.Decision{}
	outcomes := map[string]int{}
	for _, tr := range transitions {
		if tr.value == "" {
			continue
		}
		d, err := domain.ParseDecision(tr.value)
		if !assert.NoError(t, err) {
			continue
		}
		if d.Reason != "" {
			outcomes[d.Outcome.String()+"("+d.Reason+")"]++
		} else {
			outcomes[d.Outcome.String()]++
		}
		assert.Equal(t, tr.statusSynthesis, d.SynthesisUUID, "%s rv %s: a decision is written only for the synthesis current in that version", tr.name, tr.resourceVersion)
		key := decided{tr.uid, d.SynthesisUUID}
		if d.Outcome.Finished() {
			finished[key] = append(finished[key], tr.value)
		}
		if d.Outcome != domain.OutcomeRecovered {
			continue
		}
		recovered[key] = d
		synMu.Lock()
		src, cur := syntheses[d.SourceSynthesisUUID], syntheses[d.SynthesisUUID]
		synMu.Unlock()
		if !assert.NotNil(t, src, "%s recovered from an unknown synthesis %s", tr.name, d.SourceSynthesisUUID) || !assert.NotNil(t, cur) {
			continue
		}
		want := minus(src.ids(), cur.ids())
		assert.Equal(t, len(want), d.Tombstones, "%s: tombstones from exactly one snapshot", tr.name)
		got, forSynthesis, err := tombstoneSliceIDs(ctx, c, ns, d.TombstoneSlice)
		if assert.NoError(t, err) {
			assert.Equal(t, want, got, "%s: the slice holds exactly what the source snapshot has and the synthesis lacks", tr.name)
			assert.Equal(t, d.SynthesisUUID, forSynthesis)
		}
	}
	for key, values := range finished {
		assert.Len(t, values, 1, "composition UID %s synthesis %s: one finished decision, never rewritten: %v", key.uid, key.synthesis, values)
	}
	assert.GreaterOrEqual(t, len(recovered), compositions, "the final recreations recovered")
	t.Logf("decisions written: %v (%d transitions)", outcomes, len(transitions))

	// Every tombstone slice is named by a Recovered decision of its owner and synthesis.
	list, err := c.Dynamic.Resource(sliceGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: domain.LabelManagedBy + "=" + domain.ManagedByValue})
	require.NoError(t, err)
	for i := range list.Items {
		s := &list.Items[i]
		owners := s.GetOwnerReferences()
		require.Len(t, owners, 1, "slice %s", s.GetName())
		_, forSynthesis, err := tombstonesOf(s)
		require.NoError(t, err)
		d, ok := recovered[decided{string(owners[0].UID), forSynthesis}]
		if assert.True(t, ok, "tombstone slice %s has no Recovered decision", s.GetName()) {
			assert.Equal(t, s.GetName(), d.TombstoneSlice)
		}
	}
	assert.NotEmpty(t, list.Items)

	checkProxiedRequests(t, proxy.all())
	for _, p := range procs {
		logs := p.logs()
		assert.NotContains(t, logs, "WARNING: DATA RACE", p.name)
		assert.Empty(t, leaks(logs, marker, chunks), "%s logs Secret data", p.name)
		conflicts := 0
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, "reconcile failed") && (strings.Contains(line, "conflict") || strings.Contains(line, "already exists")) {
				conflicts++
			}
		}
		t.Logf("%s: %d reconciles lost a race (conflict or already exists) and were retried", p.name, conflicts)
	}
}

// waitForDecision waits until the Composition's current synthesis has a finished decision.
func waitForDecision(t *testing.T, ctx context.Context, c kubetest.Clients, ns string, cc *churnComposition) {
	t.Helper()
	require.Eventually(t, func() bool {
		live, err := liveComposition(ctx, c, domain.CompositionRef{Namespace: ns, Name: cc.name})
		if err != nil || live.UID != cc.uid {
			return false
		}
		d, ok := live.FinishedDecision()
		return ok && d.SynthesisUUID == cc.current.UUID
	}, eventually, poll, "%s: a decision for synthesis %s", cc.name, cc.current.UUID)
}

// quiesce waits until every Composition has a finished decision and a complete snapshot of its
// newest synthesis. It stands in for Eno where a recovery handed tombstones over: once the
// decided synthesis asks for a resynthesis, it publishes the next synthesis carrying the
// tombstones (design §6.2), registers it, and waits for that one instead.
func quiesce(t *testing.T, ctx context.Context, c kubetest.Clients, ns string, comps []*churnComposition, register func(*synthesis)) {
	t.Helper()
	for _, cc := range comps {
		var last string
		ok := assert.Eventually(t, func() bool {
			live, err := liveComposition(ctx, c, domain.CompositionRef{Namespace: ns, Name: cc.name})
			if err != nil {
				last = err.Error()
				return false
			}
			if carried, err := enoFollows(ctx, c, live, cc.current); err != nil {
				last = err.Error()
				return false
			} else if carried != nil {
				register(carried)
				cc.current = carried
				return false
			}
			if _, ok := live.FinishedDecision(); !ok || live.UID != cc.uid || live.SynthesisUUID() != cc.current.UUID {
				last = "no finished decision for the newest synthesis yet"
				return false
			}
			snap, err := readSnapshot(ctx, c, domain.DefaultLineage(ns, cc.name))
			last = describeSnapshot(snap, err)
			if err != nil || !domain.SnapshotMatches(snap, live) {
				return false
			}
			got := snapshotIDs(snap)
			return strings.Join(got, ",") == strings.Join(cc.current.ids(), ",")
		}, 90*time.Second, 50*time.Millisecond, "%s reaches its newest synthesis's snapshot", cc.name)
		if !ok {
			t.Fatalf("%s never converged; last seen: %s", cc.name, last)
		}
	}
}

// enoFollows plays Eno's part after a hand-off: when the current synthesis is decided Recovered
// and a resynthesis of it was requested, it publishes the next synthesis, which produces what
// current did and carries the recovery slice's tombstones. Otherwise it returns nil.
func enoFollows(ctx context.Context, c kubetest.Clients, live domain.Composition, current *synthesis) (*synthesis, error) {
	d, ok := live.FinishedDecision()
	if !ok || d.Outcome != domain.OutcomeRecovered || live.SynthesisUUID() != current.UUID ||
		live.Annotations[domain.AnnotationForceResynthesis] != current.UUID {
		return nil, nil
	}
	u, err := c.Dynamic.Resource(sliceGVR).Namespace(live.Namespace).Get(ctx, d.TombstoneSlice, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ids, _, err := tombstonesOf(u)
	if err != nil {
		return nil, err
	}
	carried := slices.Clone(current.Resources)
	for _, id := range ids {
		carried = append(carried, resource{Name: id[strings.LastIndex(id, "/")+1:], Deleted: true})
	}
	next := newSynthesis(carried)
	next.PerSlice = current.PerSlice
	return next, resynthesize(ctx, c, live.Namespace, live.Name, next)
}

// checkProxiedRequests asserts what the API server received from the controller processes.
func checkProxiedRequests(t *testing.T, calls []call) {
	t.Helper()
	require.NotEmpty(t, calls)
	conflicts := map[string]int{}
	verbs := map[string]int{}
	for _, c := range calls {
		verbs[c.key()]++
		assert.NotContains(t, []string{"delete", "deletecollection"}, c.Verb, "%s %s", c.Method, c.Path)
		assert.NotEqual(t, http.StatusForbidden, c.Status, "the deploy/ RBAC denied %s %s", c.Method, c.Path)
		if c.Resource == "secrets" {
			assert.True(t, strings.HasPrefix(c.Path, "/api/v1/namespaces/"+inventoryNamespace+"/secrets"), "secret request outside the inventory namespace: %s", c.Path)
		}
		if c.Verb == "update" {
			obj, err := bodyMeta(c.Body)
			if assert.NoError(t, err, "%s %s body", c.Method, c.Path) {
				assert.NotEmpty(t, obj.GetResourceVersion(), "an unguarded update reached the API server: %s %s", c.Method, c.Path)
			}
		}
		if c.Status == http.StatusConflict {
			conflicts[c.key()]++
			assert.Contains(t, []string{"create", "update", "patch"}, c.Verb, "only writes conflict")
		}
	}
	keys := make([]string, 0, len(verbs))
	for k := range verbs {
		keys = append(keys, fmt.Sprintf("%s=%d", k, verbs[k]))
	}
	sort.Strings(keys)
	t.Logf("the API server received %d requests from the two processes: %s", len(calls), strings.Join(keys, " "))
	t.Logf("409 Conflict answers (guarded writes that lost a race; expected): %v", conflicts)
}
