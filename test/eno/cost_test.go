//go:build eno

package eno

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// What TestMeasureReconcilerCost reads from the environment (besides ENO_MEASURE=1).
const (
	// costCompositionsEnv overrides how many Compositions each phase creates.
	costCompositionsEnv = "ENO_MEASURE_COMPOSITIONS"
	// costReportEnv, when set, is a file the test writes its report to (Markdown).
	costReportEnv = "ENO_MEASURE_REPORT"
	// costAllNamespacesEnv=1 runs eno-reconciler over every namespace (no --composition-namespace),
	// so that its cache holds every Composition; run one phase per process (costPhasesEnv), as the
	// phases' Compositions stay.
	costAllNamespacesEnv = "ENO_MEASURE_ALL_NAMESPACES"
	// costPhasesEnv, when set, names the phases to run (commas); their figures are logged, no report.
	costPhasesEnv = "ENO_MEASURE_PHASES"
)

const (
	// costCompositions is the default workload: Compositions per phase, each deploying
	// costConfigMaps ConfigMaps through the synth-cost Synthesizer.
	costCompositions = 80
	costSynthesizer  = "synth-cost"
	// costSettle is how long a phase waits after its workload is done before the quiet window.
	costSettle = 30 * time.Second
	// costQuiet is the quiet window over which steady-state figures are taken.
	costQuiet = time.Minute
	// costDoneWithin bounds the wait for a phase's workload: a bound on a wait, not a goal.
	costDoneWithin = 10 * time.Minute
	// recoveryUserAgent is the User-Agent of every request of the recovery controller
	// (runnable.UserAgent): it tells the controller's requests from Eno's in the wired process.
	recoveryUserAgent = "eno-tombstone-recovery"
)

var costConfigMaps = []string{"cm-0", "cm-1", "cm-2", "cm-3"}

// TestMeasureReconcilerCost (ENO_MEASURE=1) measures what the recovery controller adds to
// eno-reconciler (design §8.2): the same workload — N opted-in Compositions, each deploying four
// ConfigMaps — is run by stock eno-reconciler, then by eno-reconciler-wired (recovery enabled;
// every Composition also recorded), then by two stock and two wired replicas of one shard, every
// process with --leader-election as Eno deploys it (so the recovery controller runs on the
// host's leader only). Each process reaches the API server through a counting reverse proxy of its own (its
// kubeconfig's only server), so every request it sends is counted by User-Agent, verb and
// resource; its memory is read from /proc/<pid>/status (VmHWM, VmRSS) and its Go heap from its
// own /metrics. Figures are only logged (and written to $ENO_MEASURE_REPORT when set): nothing
// here asserts a time or a size.
func TestMeasureReconcilerCost(t *testing.T) {
	if os.Getenv(measureEnv) != "1" {
		t.Skipf("set %s=1 to measure", measureEnv)
	}
	if bins.wired == "" {
		t.Fatalf("no wired eno-reconciler under %s/bin", os.Getenv(enoDirEnv))
	}
	n := costCompositions
	if v := os.Getenv(costCompositionsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive integer", costCompositionsEnv, v)
		}
	}
	ctx := kubetest.Context(t, time.Minute)
	if err := createSynthesizer(ctx, costSynthesizer, costConfigMaps); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// Every phase runs eno-reconciler as Eno deploys it, with --leader-election: the recovery
	// controller follows the host's leader and takes no Lease of its own.
	phases := []costPhase{
		{name: "stock", binary: bins.reconciler, replicas: 1},
		{name: "wired", binary: bins.wired, wired: true, replicas: 1},
		{name: "stock-2-replicas", binary: bins.reconciler, replicas: 2},
		{name: "wired-2-replicas", binary: bins.wired, wired: true, replicas: 2},
	}
	var results [][]replicaCost
	only := os.Getenv(costPhasesEnv)
	for i := range phases {
		ph := &phases[i]
		if only != "" && !slices.Contains(strings.Split(only, ","), ph.name) {
			continue
		}
		var got []replicaCost
		t.Run(ph.name, func(t *testing.T) { got = ph.run(t, n) })
		if t.Failed() {
			return
		}
		if got == nil {
			t.Logf("phase %s was not run (-run filter): no comparison", ph.name)
			return
		}
		results = append(results, got)
	}
	if only != "" {
		return
	}
	report := costReport(n, phases, results)
	t.Logf("\n%s", report)
	if path := os.Getenv(costReportEnv); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Errorf("writing %s: %v", path, err)
		}
	}
}

// costPhase is one run of the workload by one kind of eno-reconciler.
type costPhase struct {
	name     string
	binary   string
	wired    bool
	replicas int
	// Filled by run.
	ns        string
	workload  time.Duration // first process start → every Composition done
	preexist  int           // inventory Secrets in the inventory namespace when the phase began
	sizes     objectSizes   // wired only
	footprint footprint     // wired only
}

// footprint is what one cached object of each of the controller's informers costs on the Go
// heap, estimated in the test process: the same objects, listed and decoded the same way (the
// Compositions unstructured, the Secrets typed without managedFields, as the informers keep
// them), retained, with the heap measured after a GC before and after.
type footprint struct {
	composition, compositionNoMF, secret float64 // bytes per object
}

func measureFootprint(t *testing.T, ns string) (footprint, error) {
	ctx := kubetest.Context(t, time.Minute)
	var fp footprint
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	before := heap()
	comps, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(comps.Items) == 0 {
		return fp, fmt.Errorf("listing the Compositions of %s: %d, %v", ns, len(comps.Items), err)
	}
	fp.composition = (heap() - before) / float64(len(comps.Items))
	for i := range comps.Items {
		comps.Items[i].SetManagedFields(nil)
	}
	fp.compositionNoMF = (heap() - before) / float64(len(comps.Items))
	runtime.KeepAlive(comps)
	comps = nil

	before = heap()
	secrets, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=eno-tombstone-recovery"})
	if err != nil || len(secrets.Items) == 0 {
		return fp, fmt.Errorf("listing the inventory Secrets: %d, %v", len(secrets.Items), err)
	}
	for i := range secrets.Items {
		secrets.Items[i].ManagedFields = nil
	}
	fp.secret = (heap() - before) / float64(len(secrets.Items))
	runtime.KeepAlive(secrets)
	return fp, nil
}

// objectSizes are the JSON sizes of one Composition of the workload and of its chunk Secret,
// as the API server returns them: what each informer entry is decoded from.
type objectSizes struct {
	composition, managedFields int // the Composition; its metadata.managedFields
	secret, inventory          int // the chunk Secret; its inventory.json
}

func measureSizes(t *testing.T, ns string) (objectSizes, error) {
	ctx := kubetest.Context(t, time.Minute)
	var sz objectSizes
	u, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).Get(ctx, "c-000", metav1.GetOptions{})
	if err != nil {
		return sz, err
	}
	whole, _ := json.Marshal(u.Object)
	mf, _ := json.Marshal(u.GetManagedFields())
	sz.composition, sz.managedFields = len(whole), len(mf)
	secret, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).Get(ctx, fmt.Sprintf("c-000-%s-0", lineage(ns, "c-000")), metav1.GetOptions{})
	if err != nil {
		return sz, err
	}
	whole, _ = json.Marshal(secret)
	sz.secret, sz.inventory = len(whole), len(secret.Data["inventory.json"])
	return sz, nil
}

// replica is one eno-reconciler process of a phase, with what measures it.
type replica struct {
	name    string
	proc    *process
	proxy   *costProxy
	sampler *rssSampler
	metrics string // its /metrics URL
	started time.Time
}

// replicaCost is what was measured of one replica.
type replicaCost struct {
	name   string
	leader bool // held eno-reconciler's Lease

	peakRSS    uint64 // VmHWM at the end of the quiet window
	steadyRSS  uint64 // median VmRSS over the quiet window
	steadyAnon uint64 // median RssAnon over the quiet window
	steadyFile uint64 // median RssFile over the quiet window
	heapLive   float64
	heapInuse  float64
	goSys      float64
	goroutines float64

	run, quiet           requestCounts // before the quiet window; within it
	runBytes, quietBytes map[string]int64
	// restClientQuiet is the process's own rest_client_requests_total over the quiet window,
	// a cross-check of the proxy's count (-1 when not exposed).
	restClientQuiet float64
}

// requestCounts counts requests by "who verb resource" (who: eno or recovery).
type requestCounts map[string]int

func (c requestCounts) total(who string) int {
	sum := 0
	for k, v := range c {
		if who == "" || strings.HasPrefix(k, who+" ") {
			sum += v
		}
	}
	return sum
}

func (c requestCounts) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (ph *costPhase) run(t *testing.T, n int) []replicaCost {
	ph.ns = admin.NewNamespace(t, "eno-cost")
	dir := t.TempDir()
	var err error
	if ph.preexist, err = countInventorySecrets(t, ""); err != nil {
		t.Fatal(err)
	}

	var reps []*replica
	t.Cleanup(func() {
		for _, r := range reps {
			if err := r.proc.stop(); err != nil {
				t.Logf("%s (pid %d) ended: %v", r.name, r.proc.pid(), err)
			}
			r.sampler.stop()
			r.proxy.Close()
			if lines := panicLines(r.proc.log(), 10, false); len(lines) > 0 {
				t.Errorf("%s logged a panic:\n%s", r.name, strings.Join(lines, "\n"))
			}
			if t.Failed() || os.Getenv(showLogsEnv) != "" {
				t.Logf("--- %s (pid %d), last 40 lines ---\n%s", r.name, r.proc.pid(), r.proc.tail(40))
			}
		}
	})
	ports, err := kubetest.FreePorts(ph.replicas)
	if err != nil {
		t.Fatal(err)
	}
	// Stock and wired start with no page of their binary cached: the wired one is just built, and
	// its cached pages, mapped in large folios around each fault, added MiBs of RssFile.
	if err := kubetest.DropPageCache(ph.binary); err != nil {
		t.Fatal(err)
	}
	for i := range ph.replicas {
		name := "eno-reconciler"
		if ph.replicas > 1 {
			name = fmt.Sprintf("eno-reconciler-%d", i)
		}
		r := &replica{name: name, proxy: startCostProxy(t, env.AdminConfig())}
		kubeconfig := filepath.Join(dir, name+".kubeconfig")
		if err := kubetest.WriteKubeconfig(kubeconfig, r.proxy.URL, nil, "cost", ""); err != nil {
			r.proxy.Close()
			t.Fatal(err)
		}
		r.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[i])
		args := []string{"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[i]), "--health-probe-addr=0", "--composition-namespace=" + ph.ns,
			"--leader-election", "--leader-election-namespace=" + ph.ns, "--leader-election-id=eno-reconciler"}
		if os.Getenv(costAllNamespacesEnv) == "1" {
			args[2] = "--composition-namespace=" // every namespace, as Eno deploys it by default
		}
		extraEnv := []string{"KUBECONFIG=" + kubeconfig}
		if ph.wired {
			extraEnv = append(extraEnv, "ENO_TOMBSTONE_RECOVERY_ENABLED=true")
			extraEnv = append(extraEnv, wiredSettings(settings{recovery: true})...)
		}
		r.started = time.Now()
		if r.proc, err = startProcess(name, ph.binary, args, extraEnv, filepath.Join(dir, name+".log")); err != nil {
			r.proxy.Close()
			t.Fatal(err)
		}
		r.sampler = startRSSSampler(r.proc.pid(), time.Second)
		reps = append(reps, r)
	}
	alive := func() {
		t.Helper()
		for _, r := range reps {
			if err := r.proc.unexpectedExit(); err != nil {
				t.Fatal(err)
			}
		}
		if err := enoController.unexpectedExit(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: namespace %s; %s; %d inventory Secrets already in %s",
		ph.name, ph.ns, describeReplicas(reps), ph.preexist, inventoryNamespace)

	// The workload: n opted-in Compositions, created at once by the admin (not counted).
	for i := range n {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "eno.azure.io/v1",
			"kind":       "Composition",
			"metadata": map[string]any{
				"name":        fmt.Sprintf("c-%03d", i),
				"namespace":   ph.ns,
				"annotations": map[string]any{optInAnnotation: "enabled"},
			},
			"spec": map[string]any{"synthesizer": map[string]any{"name": costSynthesizer}},
		}}
		if _, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(ph.ns).Create(kubetest.Context(t, time.Minute), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Composition %d: %v", i, err)
		}
	}

	// Done: every Composition Ready with nothing in flight and, wired, its synthesis recorded.
	deadline := time.Now().Add(costDoneWithin)
	var last string
	for {
		alive()
		done, status, err := ph.done(t, n)
		if err != nil {
			status = err.Error()
		}
		if done {
			break
		}
		if status != last {
			t.Logf("%s: %s", ph.name, status)
			last = status
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: workload not done within %s: %s", ph.name, costDoneWithin, status)
		}
		time.Sleep(time.Second)
	}
	doneAt := time.Now()
	ph.workload = doneAt.Sub(reps[0].started)
	t.Logf("%s: all %d Compositions done %.1f s after the start; settling %s, then a quiet window of %s",
		ph.name, n, ph.workload.Seconds(), costSettle, costQuiet)
	if ph.wired {
		if ph.sizes, err = measureSizes(t, ph.ns); err != nil {
			t.Fatal(err)
		}
	}

	sleepAlive := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
			alive()
		}
	}
	sleepAlive(costSettle)
	quietStart := time.Now()
	restBefore := make([]float64, len(reps))
	for i, r := range reps {
		restBefore[i] = scrape(r.metrics)["rest_client_requests_total"]
	}
	sleepAlive(costQuiet)
	quietEnd := time.Now()
	out := make([]replicaCost, len(reps))
	for i, r := range reps {
		m := scrape(r.metrics)
		c := &out[i]
		c.name = r.name
		c.heapLive, c.heapInuse = m["go_gc_heap_live_bytes"], m["go_memstats_heap_inuse_bytes"]
		c.goSys, c.goroutines = m["go_memstats_sys_bytes"], m["go_goroutines"]
		c.restClientQuiet = -1
		if _, ok := m["rest_client_requests_total"]; ok {
			c.restClientQuiet = m["rest_client_requests_total"] - restBefore[i]
		}
		status, err := readProcStatus(r.proc.pid())
		if err != nil {
			t.Fatal(err)
		}
		c.peakRSS = status["VmHWM"]
		c.steadyRSS, c.steadyAnon, c.steadyFile = r.sampler.medians(quietStart, quietEnd)
		t.Logf("%s %s: steady RSS %.1f MiB (anonymous %.1f, file-backed %.1f); live heap %.1f MiB", ph.name, c.name,
			float64(c.steadyRSS)/(1<<20), float64(c.steadyAnon)/(1<<20), float64(c.steadyFile)/(1<<20), c.heapLive/(1<<20))
	}
	alive()

	// Stop every process (by PID), then its proxy, so that every request is counted.
	for i, r := range reps {
		if err := r.proc.stop(); err != nil {
			t.Logf("%s (pid %d) ended: %v", r.name, r.proc.pid(), err)
		}
		r.sampler.stop()
		r.proxy.Close()
		c := &out[i]
		c.run, c.runBytes = r.proxy.counts(r.started, quietStart)
		c.quiet, c.quietBytes = r.proxy.counts(quietStart, quietEnd)
		// The holder of eno-reconciler's Lease renews it (an update); a follower only reads it.
		c.leader = c.quiet["eno update leases"] > 0
		t.Logf("%s %s: requests before the quiet window: %s", ph.name, c.name, c.run)
		t.Logf("%s %s: requests in the quiet window: %s", ph.name, c.name, c.quiet)
		t.Logf("%s %s: response bytes by request, whole phase: %s", ph.name, c.name, bytesString(r.proxy.bytesByKey()))
		t.Logf("%s %s: user agents: %v", ph.name, c.name, r.proxy.userAgents())
	}

	// Leave the inventory namespace as the phase found it, so that the next phase's Secret
	// informer starts from the same content.
	if ph.wired {
		if ph.footprint, err = measureFootprint(t, ph.ns); err != nil {
			t.Fatal(err)
		}
		if err := deleteInventorySecrets(t, ph.ns); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func describeReplicas(reps []*replica) string {
	parts := make([]string, len(reps))
	for i, r := range reps {
		parts[i] = fmt.Sprintf("%s pid %d via %s", r.name, r.proc.pid(), r.proxy.URL)
	}
	return strings.Join(parts, ", ")
}

// done reports whether every Composition of the phase is Ready on a synthesis with nothing in
// flight and, wired, has that synthesis recorded (chunk 0 names its UID and synthesis).
func (ph *costPhase) done(t *testing.T, n int) (bool, string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	list, err := admin.Dynamic.Resource(kubetest.CompositionResource).Namespace(ph.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	recorded := map[string]map[string]string{} // chunk 0 name → annotations
	if ph.wired {
		secrets, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).List(ctx, metav1.ListOptions{LabelSelector: "eno.azure.io/inventory-lineage"})
		if err != nil {
			return false, "", err
		}
		for _, s := range secrets.Items {
			recorded[s.Name] = s.Annotations
		}
	}
	ready, rec := 0, 0
	for i := range list.Items {
		u := &list.Items[i]
		syn := currentSynthesis(u)
		if syn.UUID == "" || !syn.Synthesized || !syn.Ready || syn.InFlight != "" {
			continue
		}
		ready++
		a := recorded[fmt.Sprintf("%s-%s-0", u.GetName(), lineage(ph.ns, u.GetName()))]
		if a[sourceSynthesisAnnotation] == syn.UUID && a[compositionUIDAnnotation] == string(u.GetUID()) {
			rec++
		}
	}
	status := fmt.Sprintf("%d of %d Compositions ready", ready, n)
	if ph.wired {
		status += fmt.Sprintf(", %d recorded", rec)
		return ready == n && rec == n, status, nil
	}
	return ready == n, status, nil
}

// countInventorySecrets counts the controller's Secrets in the inventory namespace, of the
// Compositions of namespace ns ("": all).
func countInventorySecrets(t *testing.T, ns string) (int, error) {
	list, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).List(kubetest.Context(t, time.Minute),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=eno-tombstone-recovery"})
	if err != nil {
		return 0, err
	}
	count := 0
	for _, s := range list.Items {
		if ns == "" || s.Annotations["eno.azure.io/composition-namespace"] == ns {
			count++
		}
	}
	return count, nil
}

// deleteInventorySecrets deletes the inventory Secrets recorded for the Compositions of ns.
func deleteInventorySecrets(t *testing.T, ns string) error {
	ctx := kubetest.Context(t, time.Minute)
	secrets := admin.Kube.CoreV1().Secrets(inventoryNamespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=eno-tombstone-recovery"})
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if s.Annotations["eno.azure.io/composition-namespace"] != ns {
			continue
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// --- the counting proxy ---

// costProxy is a plain-HTTP reverse proxy on loopback in front of the API server. One
// eno-reconciler's kubeconfig names it as the only server (control plane and downstream alike),
// so it sees every request that process sends; it authenticates upstream with the admin's
// token. Each request is noted when it arrives (a watch is one request, however long it lasts)
// and completed with its status and response bytes when it ends.
type costProxy struct {
	URL     string
	rt      http.RoundTripper
	srv     *http.Server
	done    chan struct{}
	serving sync.WaitGroup

	mu   sync.Mutex
	reqs []*proxied
	uas  map[string]int
}

type proxied struct {
	at     time.Time
	key    string // "who verb resource"
	status int
	bytes  int64
}

func startCostProxy(t *testing.T, target *rest.Config) *costProxy {
	t.Helper()
	upstream, err := url.Parse(target.Host)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upstream) },
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &costProxy{URL: "http://" + ln.Addr().String(), rt: rt, done: make(chan struct{}), uas: map[string]int{}}
	p.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.serving.Add(1)
			defer p.serving.Done()
			who := "eno"
			if strings.HasPrefix(r.UserAgent(), recoveryUserAgent) {
				who = "recovery"
			}
			req := &proxied{at: time.Now(), key: who + " " + classifyRequest(r.Method, r.URL)}
			p.mu.Lock()
			p.reqs = append(p.reqs, req)
			p.uas[r.UserAgent()]++
			p.mu.Unlock()
			cw := &countingWriter{ResponseWriter: w}
			// Deferred: ReverseProxy panics with http.ErrAbortHandler when a client goes away
			// mid-stream, which is how every watch ends.
			defer func() {
				p.mu.Lock()
				req.status, req.bytes = cw.status, cw.bytes
				p.mu.Unlock()
			}()
			rp.ServeHTTP(cw, r)
		}),
	}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("counting proxy: %v", err)
		}
	}()
	return p
}

// Close stops the proxy, its connections and its upstream connections, and waits until every
// request has ended. Safe to call twice.
func (p *costProxy) Close() {
	_ = p.srv.Close()
	<-p.done
	p.serving.Wait()
	utilnet.CloseIdleConnectionsFor(p.rt)
}

// counts returns the requests that arrived in [from, to), by key, and their response bytes.
func (p *costProxy) counts(from, to time.Time) (requestCounts, map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, b := requestCounts{}, map[string]int64{}
	for _, r := range p.reqs {
		if !r.at.Before(from) && r.at.Before(to) {
			c[r.key]++
			b[r.key] += r.bytes
		}
	}
	return c, b
}

// bytesByKey is the response bytes of every request, by key.
func (p *costProxy) bytesByKey() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := map[string]int64{}
	for _, r := range p.reqs {
		b[r.key] += r.bytes
	}
	return b
}

func (p *costProxy) userAgents() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.uas)
}

// countingWriter remembers the status and counts the body bytes; Unwrap keeps flushing
// (watches) working.
type countingWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// classifyRequest names a request "verb resource": verbs as Kubernetes' audit names them (get,
// list, watch, create, update, patch, delete, deletecollection), resource with its
// subresource; discovery and other non-resource paths are "get discovery".
func classifyRequest(method string, u *url.URL) string {
	r := kubetest.ParseRequest(method, u)
	if r.NonResource {
		return r.Verb + " discovery"
	}
	return r.VerbResource()
}

// --- memory ---

// rssSampler reads a process's VmRSS, RssAnon and RssFile every interval until stopped.
type rssSampler struct {
	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}

	mu      sync.Mutex
	samples []rssSample
}

type rssSample struct {
	at              time.Time
	rss, anon, file uint64
}

func startRSSSampler(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if st, err := readProcStatus(pid); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, rssSample{at: time.Now(), rss: st["VmRSS"], anon: st["RssAnon"], file: st["RssFile"]})
				s.mu.Unlock()
			}
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() {
	s.stopOnce.Do(func() { close(s.quit) })
	<-s.done
}

// medians returns the median VmRSS, RssAnon and RssFile of the samples taken in [from, to].
func (s *rssSampler) medians(from, to time.Time) (rss, anon, file uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r, a, f []uint64
	for _, x := range s.samples {
		if !x.at.Before(from) && !x.at.After(to) {
			r, a, f = append(r, x.rss), append(a, x.anon), append(f, x.file)
		}
	}
	return median(r), median(a), median(f)
}

func median(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// readProcStatus reads the "kB" fields of /proc/<pid>/status, in bytes.
func readProcStatus(pid int) (map[string]uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(value)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
			out[name] = kb * 1024
		}
	}
	return out, sc.Err()
}

// scrape reads a Prometheus text endpoint and sums each metric's samples over their labels.
// It returns what it could read; an unreachable endpoint gives an empty map.
func scrape(u string) map[string]float64 {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	out := map[string]float64{}
	resp, err := client.Get(u)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
			if j := strings.LastIndexByte(line, ' '); j >= i {
				rest = line[j+1:]
			}
		}
		if v, err := strconv.ParseFloat(rest, 64); err == nil {
			out[name] += v
		}
	}
	return out
}

// --- the report ---

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func bytesString(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if m[k] >= 1024 {
			parts = append(parts, fmt.Sprintf("%s=%.0f KiB", k, float64(m[k])/1024))
		}
	}
	return strings.Join(parts, ", ")
}

// costReport renders the figures as Markdown: stock against wired, then each replica of the
// two-replica phase.
func costReport(n int, phases []costPhase, results [][]replicaCost) string {
	var b strings.Builder
	stock, wired := results[0][0], results[1][0]
	perMin := func(c requestCounts, who string) float64 { return float64(c.total(who)) / costQuiet.Minutes() }
	fmt.Fprintf(&b, "Workload: %d opted-in Compositions × %d ConfigMaps; done (all Ready, and recorded when wired) after %.0f s (stock) and %.0f s (wired) from process start; settle %s; quiet window %s.\n\n",
		n, len(costConfigMaps), phases[0].workload.Seconds(), phases[1].workload.Seconds(), costSettle, costQuiet)
	b.WriteString("| metric | stock | wired | wired/stock | extra |\n|---|---|---|---|---|\n")
	row := func(name string, s, w float64, f func(float64) string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", name, f(s), f(w), ratio(w, s), f(w-s))
	}
	count := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	row("peak RSS (VmHWM)", float64(stock.peakRSS), float64(wired.peakRSS), mib)
	row("steady RSS (median VmRSS, quiet window)", float64(stock.steadyRSS), float64(wired.steadyRSS), mib)
	row("… of which anonymous (RssAnon)", float64(stock.steadyAnon), float64(wired.steadyAnon), mib)
	row("… of which file-backed (RssFile)", float64(stock.steadyFile), float64(wired.steadyFile), mib)
	row("Go live heap (go_gc_heap_live_bytes, end)", stock.heapLive, wired.heapLive, mib)
	row("Go heap in use (end)", stock.heapInuse, wired.heapInuse, mib)
	row("Go runtime memory from the OS (go_memstats_sys_bytes)", stock.goSys, wired.goSys, mib)
	row("goroutines (end)", stock.goroutines, wired.goroutines, count)
	row("API requests, start → quiet window", float64(stock.run.total("")), float64(wired.run.total("")), count)
	row("… of which the recovery controller's", float64(stock.run.total("recovery")), float64(wired.run.total("recovery")), count)
	row("API requests in the quiet minute (requests/min)", perMin(stock.quiet, ""), perMin(wired.quiet, ""), count)
	row("… of which the recovery controller's", perMin(stock.quiet, "recovery"), perMin(wired.quiet, "recovery"), count)
	row("rest_client_requests_total over the quiet minute (cross-check)", stock.restClientQuiet, wired.restClientQuiet, count)
	fmt.Fprintf(&b, "\nWired, the recovery controller's requests before the quiet window (%.2f per Composition): %s.\n",
		float64(wired.run.total("recovery"))/float64(n), wired.run.filter("recovery"))
	fmt.Fprintf(&b, "Wired, its requests in the quiet minute: %s.\n", wired.quiet.filter("recovery"))
	fmt.Fprintf(&b, "Stock, requests in the quiet minute: %s.\n", stock.quiet)
	sz := phases[1].sizes
	fmt.Fprintf(&b, "One Composition as JSON: %d bytes, of which metadata.managedFields %d; its chunk Secret: %d bytes, of which inventory.json %d.\n",
		sz.composition, sz.managedFields, sz.secret, sz.inventory)
	fp := phases[1].footprint
	fmt.Fprintf(&b, "Go heap per cached object (estimated in the test process): a Composition, unstructured, %.1f KiB (%.1f KiB without managedFields); a chunk Secret without managedFields %.1f KiB.\n",
		fp.composition/1024, fp.compositionNoMF/1024, fp.secret/1024)
	fmt.Fprintf(&b, "Response bytes of the recovery controller's watches over the whole wired phase: %s.\n", bytesString(filterBytes(wired.runBytes, wired.quietBytes, "recovery watch")))

	if len(results) > 3 {
		fmt.Fprintf(&b, "\nTwo replicas of one shard, eno-reconciler's Lease deciding the leader (%.0f s to done stock, %.0f s wired):\n\n",
			phases[2].workload.Seconds(), phases[3].workload.Seconds())
		b.WriteString("| role | stock steady RSS | wired steady RSS | wired/stock | stock peak | wired peak | requests/min quiet, stock | wired (recovery's) |\n|---|---|---|---|---|---|---|---|\n")
		for _, leader := range []bool{true, false} {
			st, wi, ok := byRole(results[2], leader), byRole(results[3], leader), true
			if st == nil || wi == nil {
				ok = false
			}
			role := map[bool]string{true: "leader", false: "follower"}[leader]
			if !ok {
				fmt.Fprintf(&b, "| %s | no replica held that role |\n", role)
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s (%s) |\n", role,
				mib(float64(st.steadyRSS)), mib(float64(wi.steadyRSS)), ratio(float64(wi.steadyRSS), float64(st.steadyRSS)),
				mib(float64(st.peakRSS)), mib(float64(wi.peakRSS)),
				count(perMin(st.quiet, "")), count(perMin(wi.quiet, "")), count(perMin(wi.quiet, "recovery")))
		}
		for _, r := range results[3] {
			fmt.Fprintf(&b, "\nwired %s (leader %v), the recovery controller's requests before the quiet window: %s; in the quiet minute: %s.", r.name, r.leader, r.run.filter("recovery"), r.quiet.filter("recovery"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// byRole is the replica of a two-replica phase that led (or followed), nil when none did.
func byRole(reps []replicaCost, leader bool) *replicaCost {
	for i := range reps {
		if reps[i].leader == leader {
			return &reps[i]
		}
	}
	return nil
}

// filterBytes adds up the byte counts of keys starting with prefix.
func filterBytes(a, b map[string]int64, prefix string) map[string]int64 {
	out := map[string]int64{}
	for _, m := range []map[string]int64{a, b} {
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				out[k] += v
			}
		}
	}
	return out
}

// filter keeps the counts of one requester.
func (c requestCounts) filter(who string) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if strings.HasPrefix(k, who+" ") {
			out[k] = v
		}
	}
	return out
}
