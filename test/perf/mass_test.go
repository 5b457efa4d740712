package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// The mass recovery of issue 35: a rebuilt control plane. Each Composition deploys massObjects
// ConfigMaps; all are deleted with deletion-strategy orphan and re-created at once, each first
// synthesis dropping massDropped of them.
const (
	massObjects = 100
	massDropped = 10
	// massTrial is the size every `go test ./test/perf/` runs, with the design's assertions.
	massTrial = 8
	// enoFieldManager is the field manager eno-reconciler applies with.
	enoFieldManager = "eno"
)

var configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// massManifest is object r of Composition comp: a ConfigMap of its own in namespace objects.
func massManifest(objects, comp string, r int) string {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": fmt.Sprintf("%s-%03d", comp, r), "namespace": objects,
			"labels": map[string]string{"app.kubernetes.io/name": "mass", "app.kubernetes.io/instance": comp}},
		"data": map[string]string{"key": "value"},
	})
	return string(b)
}

func massSlice(ns, comp, uuid, objects string, resources int) domain.ResourceSlice {
	s := domain.ResourceSlice{Namespace: ns, Name: comp + "-" + uuid[:8] + "-0"}
	for r := range resources {
		s.Resources = append(s.Resources, domain.SliceResource{Manifest: massManifest(objects, comp, r)})
	}
	return s
}

// massRun is one binary's mass recovery at one size, as measured.
type massRun struct {
	binary       string // "before" or "after"
	n            int
	toLast       time.Duration // re-creation begins → the last decision written
	requests     Counts        // of the recovery, events included
	bytes        Counts
	floor        time.Duration // the busiest client limiter's requests / QPS
	floorOf      string
	peakKB       int
	kept         []string      // the Compositions that kept an orphan, and why
	cpu          time.Duration // of the process, from its start (recording included) to the end
	failed       Counts
	exitErr      error
	recordedTook time.Duration // the first phase: process start → every Composition recorded
}

func (r massRun) bytesPerComp() float64 { return float64(r.bytes.Total()) / float64(r.n) }
func (r massRun) listPerComp() float64 {
	// client-go lists by a streaming watch where the API server offers it (WatchListClient).
	return float64(r.bytes["list resourceslices"]+r.bytes["watch resourceslices"]) / float64(r.n)
}

// TestMassRecovery measures the mass recovery of issue 35 with the real binary at its default
// client QPS (50, burst 100): N Compositions of massObjects ConfigMaps, recorded, then all
// deleted (orphaning) and re-created at once, each dropping massDropped, until every one has its
// decision. Without ENO_MASS=1 it runs a trial of massTrial Compositions and asserts what the
// design says about it; with it, the sizes of ENO_MASS_SIZES (default "100,1000") for this tree's
// binary and, when ENO_MASS_BASE_BIN names one, a baseline binary alternated with it.
func TestMassRecovery(t *testing.T) {
	sizes, report, baseBin := []int{massTrial}, "", ""
	if os.Getenv("ENO_MASS") == "1" {
		sizes = nil
		for _, f := range strings.Split(cmpOr(os.Getenv("ENO_MASS_SIZES"), "100,1000"), ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(t, err, "ENO_MASS_SIZES")
			sizes = append(sizes, n)
		}
		report, baseBin = reportPath(t, os.Getenv("ENO_MASS_REPORT")), os.Getenv("ENO_MASS_BASE_BIN")
	}
	// A baseline that reads the fleet per plan grows with N²: ENO_MASS_BASE_MAX bounds its sizes.
	baseMax := envInt(t, "ENO_MASS_BASE_MAX", math.MaxInt)
	a := newAdmin(t)
	dir := t.TempDir()
	build, err := kubetest.StartBuild(dir, false)
	require.NoError(t, err)
	objects := a.NewNamespace(t, "mass-objects")
	applyMassObjects(t, a, objects, slices.Max(sizes))
	bin, err := build()
	require.NoError(t, err)

	var runs []massRun
	for _, n := range sizes {
		binaries := [][2]string{{"after", bin}}
		if baseBin != "" && n <= baseMax { // alternated: the baseline first at one size, second at the next
			binaries = append(binaries, [2]string{"before", baseBin})
			if len(runs)%4 == 0 {
				binaries[0], binaries[1] = binaries[1], binaries[0]
			}
		}
		for _, b := range binaries {
			r := runMassRecovery(t, a, b[0], b[1], objects, n, filepath.Join(dir, fmt.Sprintf("%s-%d", b[0], n)))
			t.Logf("%s at %d: last decision %.1f s, floor %.1f s, %.0f KiB per Composition, peak %.1f MiB",
				r.binary, n, r.toLast.Seconds(), r.floor.Seconds(), r.bytesPerComp()/1024, float64(r.peakKB)/1024)
			runs = append(runs, r)
			if b[0] == "after" {
				assertMassDesign(t, r)
			}
		}
	}
	text := massReport(runs)
	t.Log(text)
	if report != "" {
		require.NoError(t, os.MkdirAll(filepath.Dir(report), 0o755))
		require.NoError(t, os.WriteFile(report, []byte(text), 0o644))
		t.Logf("report: %s", report)
	}
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// applyMassObjects creates every Composition's ConfigMaps downstream as eno-reconciler does:
// server-side apply under field manager eno. Every run shares them; none is ever deleted.
func applyMassObjects(t *testing.T, a admin, objects string, n int) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	parallel(t, n*massObjects, func(i int) error {
		var u unstructured.Unstructured
		if err := json.Unmarshal([]byte(massManifest(objects, fmt.Sprintf("app-%04d", i/massObjects), i%massObjects)), &u.Object); err != nil {
			return err
		}
		_, err := a.Dynamic.Resource(configMapGVR).Namespace(objects).Apply(ctx, u.GetName(), &u, metav1.ApplyOptions{FieldManager: enoFieldManager, Force: true})
		return err
	})
	t.Logf("setup: %d ConfigMaps applied in %s", n*massObjects, time.Since(start).Round(time.Second))
}

// parallel runs f(0..n-1) on 16 goroutines and fails on the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// createMassComposition creates an opted-in Composition whose synthesis deploys the first
// resources of its ConfigMaps, as Eno publishes it: the Composition, then its slice controlled by
// it, stamped "" (a first synthesis), then the Ready status naming the slice.
func createMassComposition(ctx context.Context, a admin, ns, name, uuid, objects string, resources int) error {
	client := a.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns)
	u, err := kubetest.CreateComposition(ctx, a.Dynamic, domain.Composition{Namespace: ns, Name: name,
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue, "eno.azure.io/deletion-strategy": "orphan"}})
	if err != nil {
		return err
	}
	s := massSlice(ns, name, uuid, objects, resources)
	if _, err := kubetest.CreateSliceOwnedBy(ctx, a.Dynamic, s, &domain.Composition{Name: name, UID: string(u.GetUID())}); err != nil {
		return err
	}
	u.Object["status"] = kubetest.CompositionStatus(domain.Synthesis{UUID: uuid, Synthesized: synthesizedAt, Ready: true, Slices: []string{s.Name}})
	_, err = client.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

// deleteMassCompositions removes every Composition of ns and every slice, as Eno does with
// deletion-strategy orphan (the objects stay) and the garbage collector after it (the slices
// go). A recovery slice carries Eno's finalizer, which Eno's cleanup would remove.
func deleteMassCompositions(t *testing.T, a admin, ns string) {
	t.Helper()
	ctx := context.Background()
	sl := a.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(ns)
	list, err := sl.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range list.Items {
		if len(s.GetFinalizers()) > 0 {
			_, err := sl.Patch(ctx, s.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			require.NoError(t, err)
		}
	}
	require.NoError(t, a.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	require.NoError(t, sl.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
}

// runMassRecovery runs one binary through the workload at size n and measures the recovery.
func runMassRecovery(t *testing.T, a admin, name, bin, objects string, n int, dir string) massRun {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ns, inv := a.NewNamespace(t, "mass"), a.NewNamespace(t, "mass-inventory")
	comp := func(i int) string { return fmt.Sprintf("app-%04d", i) }
	parallel(t, n, func(i int) error {
		return createMassComposition(ctx, a, ns, comp(i), uuidFor(i+1), objects, massObjects)
	})
	chunks := 0
	for i := range n {
		c := domain.Composition{Namespace: ns, Name: comp(i), Synthesis: &domain.Synthesis{UUID: uuidFor(i + 1), Synthesized: synthesizedAt, Ready: true}}
		s := massSlice(ns, comp(i), uuidFor(i+1), objects, massObjects)
		c.Synthesis.Slices = []string{s.Name}
		contents, err := domain.ReadSynthesis(c, []domain.ResourceSlice{s})
		require.NoError(t, err)
		split, err := domain.SplitInventory(contents.Inventory(), domain.DefaultMaxChunkBytes, domain.DefaultMaxChunks)
		require.NoError(t, err)
		chunks += len(split)
	}

	counter := NewCounter()
	proxy := startProxy(t, env.AdminConfig(), counter)
	logPath := filepath.Join(dir, "controller.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(bin, "run",
		"--kubeconfig="+proxy.Kubeconfig(t, dir),
		"--composition-namespace="+ns,
		"--inventory-namespace="+inv,
		"--kube-api-qps="+strconv.Itoa(binaryQPS),
		"--kube-api-burst="+strconv.Itoa(binaryBurst),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = kubetest.ChildSysProcAttr()
	started := time.Now()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	out := massRun{binary: name, n: n}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case out.exitErr = <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			out.exitErr = fmt.Errorf("killed after a minute: %w", <-exited)
		}
	}
	t.Cleanup(stop)
	timeout := time.Duration(envInt(t, "ENO_MASS_TIMEOUT_MINUTES", 30)) * time.Minute
	waitFor := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for !done() {
			select {
			case err := <-exited:
				stopped = true
				t.Fatalf("%s: the controller exited early (%v); log:\n%s", name, err, tail(logPath, 30))
			case <-time.After(200 * time.Millisecond):
			}
			require.True(t, time.Now().Before(deadline), "%s: %s not done after %s; requests %s; log:\n%s",
				name, what, timeout, counter.Snapshot(), tail(logPath, 30))
		}
	}

	// Recorded: a decision and every chunk each, then quiet for 3 s.
	waitFor("recording", func() bool {
		d, _ := counter.Decisions()
		return d >= n && counter.Succeeded("create secrets") >= chunks
	})
	out.recordedTook = time.Since(started)
	waitQuiet(counter, 3*time.Second)

	// The control plane is rebuilt: every Composition deleted (orphaning) and re-created at once.
	deleteMassCompositions(t, a, ns)
	before, bytesBefore := counter.Snapshot(), counter.Bytes()
	recreated := time.Now()
	parallel(t, n, func(i int) error {
		return createMassComposition(ctx, a, ns, comp(i), uuidFor(1_000_000+i+1), objects, massObjects-massDropped)
	})
	decided := func() bool {
		if d, _ := counter.Decisions(); d < 2*n {
			return false
		}
		list, err := a.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		got, kept := 0, []string{}
		for _, u := range list.Items {
			uuid, _, _ := unstructured.NestedString(u.Object, "status", "currentSynthesis", "uuid")
			if d, err := domain.ParseDecision(u.GetAnnotations()[domain.AnnotationDecision]); err == nil && d.SynthesisUUID == uuid {
				got++
				require.Equal(t, domain.OutcomeRecovered, d.Outcome, "%s: %s: %s", name, u.GetName(), d.Message)
				require.LessOrEqual(t, d.Tombstones, massDropped, "%s: %s", name, u.GetName())
				if d.Tombstones < massDropped { // a fingerprint collision keeps an orphan (design §6.3)
					kept = append(kept, fmt.Sprintf("%s kept %d: %s", u.GetName(), massDropped-d.Tombstones, d.Message))
				}
			}
		}
		if got < n {
			time.Sleep(time.Second)
		}
		out.kept = kept
		return got == n
	}
	waitFor("the decisions", decided)
	_, last := counter.Decisions()
	out.toLast = last.Sub(recreated)
	waitQuiet(counter, 3*time.Second) // the force annotation follows each decision (design §6.2)
	out.peakKB, out.cpu = procStatusKB(t, cmd.Process.Pid, "VmHWM"), procCPU(t, cmd.Process.Pid)
	out.requests, out.bytes = counter.Snapshot().Sub(before), counter.Bytes().Sub(bytesBefore)
	out.failed = counter.Failed()
	stop()
	proxy.Close()
	deleteMassCompositions(t, a, ns) // the next run's fleet starts empty
	assert.NoError(t, out.exitErr, "%s: SIGTERM should end the controller with status 0; log:\n%s", name, tail(logPath, 20))

	// The floor: each client of the binary has its own limiter, so the busiest one's requests at QPS.
	byLimiter := map[string]int{}
	for k, v := range out.requests {
		_, r, _ := strings.Cut(k, " ")
		r, _, _ = strings.Cut(r, " ") // "compositions (decision)" is a composition's
		switch strings.SplitN(r, "/", 2)[0] {
		case "compositions", "resourceslices":
			byLimiter["control plane (dynamic)"] += v
		case "secrets":
			byLimiter["downstream Secrets"] += v
		case "events":
			byLimiter["events"] += v
		default:
			byLimiter["downstream objects and discovery"] += v
		}
	}
	for k, v := range byLimiter {
		if f := time.Duration(float64(v) / binaryQPS * float64(time.Second)); f > out.floor {
			out.floor, out.floorOf = f, k
		}
	}
	return out
}

// waitQuiet waits until no request has been counted for quiet, at most a minute.
func waitQuiet(counter *Counter, quiet time.Duration) {
	quietSince, lastTotal := time.Now(), counter.Snapshot().Total()
	for settle := time.Now(); time.Since(quietSince) < quiet && time.Since(settle) < time.Minute; time.Sleep(200 * time.Millisecond) {
		if tot := counter.Snapshot().Total(); tot != lastTotal {
			quietSince, lastTotal = time.Now(), tot
		}
	}
}

// assertMassDesign checks the recovery's requests against the design (§6.2, §6.3): per
// Composition one hand-off of one recovery slice (arm, create, name, decide, force), one
// downstream GET per tombstone, no failure, and no list of slices or Compositions: the fleet
// index answers.
func assertMassDesign(t *testing.T, r massRun) {
	t.Helper()
	n := r.n
	assert.Empty(t, r.failed, "%s at %d: no request fails", r.binary, n)
	assert.Equal(t, n, r.requests["create resourceslices"], "one recovery slice each")
	assert.Equal(t, n, r.requests["patch compositions/status"], "each names its slice once")
	assert.Equal(t, n, r.requests[decisionWrite], "one decision each")
	assert.Equal(t, 2*n, r.requests["patch compositions"], "arming and the forced resynthesis")
	assert.GreaterOrEqual(t, r.requests["get configmaps"], massDropped*n, "one downstream read per tombstone, again after a wait")
	// A plan that waits for another Composition's first synthesis reads again after the wait
	// (design §6.3); the report lists every count.
	assert.GreaterOrEqual(t, r.requests["list secrets"], n, "one live list of the lineage each, again after a wait")
	assert.Zero(t, r.requests["list resourceslices"], "the fleet index answers K4 and N1")
	assert.Zero(t, r.requests["list compositions"], "the fleet index answers K6a")
	expected := []string{
		"list secrets", "get resourceslices", "get compositions", "get configmaps", "get /api", "get /apis",
		"create resourceslices", "patch compositions/status", decisionWrite, "patch compositions",
		"create events", "patch events", "watch resourceslices", "watch compositions", "watch secrets",
	}
	for k := range r.requests {
		assert.Contains(t, expected, k, "%s at %d: a request the design does not expect: %s", r.binary, n, r.requests)
	}
}

// massReport is the figures of every run, and the growth exponent per binary between the first
// and the last size: log(per-Composition figure ratio) / log(size ratio), 0 when flat.
func massReport(runs []massRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| binary | N | recorded in | to the last decision | limiter floor (busiest: requests/%d) | ÷ floor | requests per Composition | KiB read per Composition, all / slices listed and watched | peak RSS (VmHWM) | CPU of the process |\n|---|---|---|---|---|---|---|---|---|---|\n", binaryQPS)
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %d | %.1f s | %.1f s | %.1f s (%s) | %.2f× | %.1f | %.0f / %.0f | %.1f MiB | %.1f s |\n",
			r.binary, r.n, r.recordedTook.Seconds(), r.toLast.Seconds(), r.floor.Seconds(), r.floorOf, r.toLast.Seconds()/r.floor.Seconds(),
			float64(r.requests.Total())/float64(r.n), r.bytesPerComp()/1024, r.listPerComp()/1024, float64(r.peakKB)/1024, r.cpu.Seconds())
	}
	for _, name := range []string{"before", "after"} {
		var of []massRun
		for _, r := range runs {
			if r.binary == name {
				of = append(of, r)
			}
		}
		for i := 1; i < len(of); i++ {
			for _, lo := range of[:i] {
				hi := of[i]
				if lo.n == hi.n {
					continue
				}
				exp := func(a, b float64) float64 { return math.Log(b/a) / math.Log(float64(hi.n)/float64(lo.n)) }
				fmt.Fprintf(&b, "\n%s, growth exponent %d → %d: bytes per Composition %.2f, time per Composition %.2f\n", name, lo.n, hi.n,
					exp(lo.bytesPerComp(), hi.bytesPerComp()), exp(lo.toLast.Seconds()/float64(lo.n), hi.toLast.Seconds()/float64(hi.n)))
			}
		}
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "\n%s at %d: requests: %s\nbytes: %s\nfailed: %s\norphans kept: %q\n", r.binary, r.n, r.requests, r.bytes, r.failed, r.kept)
	}
	return b.String()
}
