package perf

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net/http"
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

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// Scale parameters; ENO_SCALE_COMPOSITIONS overrides the count for a quicker trial.
const (
	scaleCompositions = 1000
	scaleMinResources = 50
	scaleMaxResources = 500
	// scalePerSlice stands in for Eno's packing of manifests into ResourceSlices: 1–5 slices here.
	scalePerSlice = 100
	// designExtra is what a reconcile of a first synthesis costs beyond the minimum: the live
	// LIST of the lineage's Secrets, the live recheck before the decision, and its PUT.
	designExtra = 3
	// designEvents is the events that reconcile emits: the decision and InventoryRecorded.
	designEvents = 2
)

// scaleResources is Composition i's resource count: deterministic, spread over 50–500.
func scaleResources(i int) int {
	return scaleMinResources + (i*7919)%(scaleMaxResources-scaleMinResources+1)
}

func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s", name)
	return n
}

// scaleTrialCompositions is how many Compositions TestScale records without ENO_SCALE=1: a trial
// in every `go test ./...` that the scale run still builds, records, verifies and reports.
const scaleTrialCompositions = 24

// TestScale records 1,000 opted-in Compositions of 50–500 resources from scratch with the real
// binary at its default client QPS (50, burst 100), counting its requests through a proxy, and
// reports the time, the requests against the minimum, the QPS floor and the peak RSS. That takes
// minutes, so it runs only with ENO_SCALE=1 (make scale); without it, a trial of
// scaleTrialCompositions runs the same steps and writes its report to a temporary folder.
func TestScale(t *testing.T) {
	n, report := scaleTrialCompositions, filepath.Join(t.TempDir(), "scale-trial.md")
	if os.Getenv("ENO_SCALE") == "1" {
		n, report = envInt(t, "ENO_SCALE_COMPOSITIONS", scaleCompositions), reportPath(t, os.Getenv("ENO_SCALE_REPORT"))
	}
	extraLabels = envInt(t, "ENO_SCALE_EXTRA_LABELS", 0)
	t.Cleanup(func() { extraLabels = 0 })
	timeout := time.Duration(envInt(t, "ENO_SCALE_TIMEOUT_MINUTES", 30)) * time.Minute
	ctx := context.Background()
	a := newAdmin(t)
	a.skipObjects = true // it only records: no recovery reads the objects downstream
	dir := t.TempDir()

	// Without -race even under it: the run measures the binary as it ships.
	build, err := kubetest.StartBuild(dir, false)
	require.NoError(t, err)
	bin, err := build()
	require.NoError(t, err)
	if base := os.Getenv("ENO_SCALE_BIN"); base != "" {
		bin = base // another build, e.g. a baseline's, measured the same way
	}

	// Setup through the fast admin client; nothing of it is counted.
	ns, inv := a.NewNamespace(t, "scale"), a.NewNamespace(t, "scale-inventory")
	type want struct {
		name          string
		uuid          string
		slices, chunk int
	}
	wants := make([]want, n)
	var sumSlices, sumChunks, sumResources int
	for i := range wants {
		syn := synthesis{uuid: uuidFor(i + 1), resources: scaleResources(i), perSlice: scalePerSlice}
		name := fmt.Sprintf("app-%04d", i)
		wants[i] = want{name: name, uuid: syn.uuid, slices: len(syn.sliceNames(name)),
			chunk: syn.chunks(t, ns, name, domain.DefaultMaxChunkBytes)}
		sumSlices += wants[i].slices
		sumChunks += wants[i].chunk
		sumResources += syn.resources
	}
	setupStart := time.Now()
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				syn := synthesis{uuid: wants[i].uuid, resources: scaleResources(i), perSlice: scalePerSlice}
				if _, err := a.createComposition(ctx, ns, wants[i].name, syn); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range wants {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("setup: %d compositions, %d resources, %d slices in %s", n, sumResources, sumSlices, time.Since(setupStart).Round(time.Second))

	// The binary, through the counting proxy.
	counter := NewCounter()
	proxy := startProxy(t, env.AdminConfig(), counter)
	kubeconfig := proxy.Kubeconfig(t, dir)
	logPath := filepath.Join(dir, "controller.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	ports, err := kubetest.FreePorts(1)
	require.NoError(t, err)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	cmd := exec.Command(bin, "run",
		"--kubeconfig="+kubeconfig,
		"--composition-namespace="+ns,
		"--inventory-namespace="+inv,
		"--kube-api-qps="+strconv.Itoa(binaryQPS),
		"--kube-api-burst="+strconv.Itoa(binaryBurst),
		"--metrics-bind-address="+metricsAddr,
		"--health-probe-bind-address=0",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = kubetest.ChildSysProcAttr()
	started := time.Now()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	var exitErr error
	var exitTook time.Duration
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		signalled := time.Now()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case exitErr = <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			exitErr = fmt.Errorf("killed after a minute: %w", <-exited)
		}
		exitTook = time.Since(signalled)
	}
	t.Cleanup(stop)

	// Done when every Composition has its decision and every chunk is written.
	deadline := time.After(timeout)
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	decisions := func() int { d, _ := counter.Decisions(); return d }
	for decisions() < n || counter.Succeeded("create secrets") < sumChunks {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the controller exited early (%v); log:\n%s", err, tail(logPath, 30))
		case <-deadline:
			t.Fatalf("not done after %s: %d/%d decisions, %d/%d chunks; requests %s; failed %s; log:\n%s",
				timeout, decisions(), n, counter.Succeeded("create secrets"), sumChunks,
				counter.Snapshot(), counter.Failed(), tail(logPath, 30))
		case <-progress.C:
			t.Logf("%s: %d/%d decisions, %d/%d chunks, %d requests", time.Since(started).Round(time.Second),
				decisions(), n, counter.Succeeded("create secrets"), sumChunks, counter.Snapshot().Total())
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, done := counter.Decisions()
	if last := counter.LastSuccess("create secrets"); last.After(done) {
		done = last
	}
	firstSlice := counter.First("get resourceslices")

	// Let follow-up reconciles (the controller's own writes re-enqueue each Composition) finish:
	// quiet for 5 s, at most a minute.
	quietSince, lastTotal := time.Now(), counter.Snapshot().Total()
	for settle := time.Now(); time.Since(quietSince) < 5*time.Second && time.Since(settle) < time.Minute; time.Sleep(200 * time.Millisecond) {
		if tot := counter.Snapshot().Total(); tot != lastTotal {
			quietSince, lastTotal = time.Now(), tot
		}
	}
	hwm, rss := procStatusKB(t, cmd.Process.Pid, "VmHWM"), procStatusKB(t, cmd.Process.Pid, "VmRSS")
	rssFile, cpu := procStatusKB(t, cmd.Process.Pid, "RssFile"), procCPU(t, cmd.Process.Pid)
	mem := scrape(t, "http://"+metricsAddr+"/metrics", "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes")
	stop()
	proxy.Close()
	total, failed, read := counter.Snapshot(), counter.Failed(), counter.Bytes()
	assert.NoError(t, exitErr, "SIGTERM should end the controller with status 0; log:\n%s", tail(logPath, 20))

	inventoryBytes := verifyScale(t, a, ns, inv, n)

	// Figures.
	strict := sumSlices + 2*sumChunks
	design := strict + designExtra*n
	requests := total.Without("events").Total()
	elapsed := done.Sub(started)
	reconciling := done.Sub(firstSlice)
	byLimiter := map[string]int{}
	for k, v := range total {
		_, r, _ := strings.Cut(k, " ")
		r, _, _ = strings.Cut(r, " ") // "compositions (decision)" is a composition's
		switch strings.SplitN(r, "/", 2)[0] {
		case "compositions", "resourceslices":
			byLimiter["dynamic"] += v
		case "secrets":
			byLimiter["downstream"] += v
		case "events":
			byLimiter["control plane"] += v
		}
	}
	floor := func(req int) time.Duration {
		return time.Duration(float64(max(0, req-binaryBurst)) / binaryQPS * float64(time.Second))
	}
	bindingName, binding := "", time.Duration(0)
	for _, name := range slices.Sorted(maps.Keys(byLimiter)) {
		if f := floor(byLimiter[name]); f > binding {
			bindingName, binding = name, f
		}
	}
	strictFloor := time.Duration(float64(strict) / binaryQPS * float64(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "\n| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| Compositions / resources / slices / chunks | %d / %d / %d / %d |\n", n, sumResources, sumSlices, sumChunks)
	fmt.Fprintf(&b, "| time to record all (process start → last write) | %.1f s |\n", elapsed.Seconds())
	fmt.Fprintf(&b, "| of which startup (process start → first slice read) | %.1f s |\n", firstSlice.Sub(started).Seconds())
	fmt.Fprintf(&b, "| requests, events excluded | %d |\n", requests)
	fmt.Fprintf(&b, "| events API requests | %d |\n", total.Events())
	fmt.Fprintf(&b, "| minimum Σ(s+2n) | %d |\n", strict)
	fmt.Fprintf(&b, "| design Σ(s+2n+3) | %d |\n", design)
	fmt.Fprintf(&b, "| requests / minimum | %.3f |\n", float64(requests)/float64(strict))
	fmt.Fprintf(&b, "| requests / design | %.3f |\n", float64(requests)/float64(design))
	fmt.Fprintf(&b, "| (requests + events) / (design + 2 events each) | %.3f |\n", float64(total.Total())/float64(design+designEvents*n))
	fmt.Fprintf(&b, "| QPS floor, minimum / 50 | %.1f s (elapsed %.2f×) |\n", strictFloor.Seconds(), elapsed.Seconds()/strictFloor.Seconds())
	fmt.Fprintf(&b, "| QPS floor of the busiest client limiter (%s, %d requests, (r-100)/50) | %.1f s (elapsed %.2f×, reconciling %.2f×) |\n",
		bindingName, byLimiter[bindingName], binding.Seconds(), elapsed.Seconds()/binding.Seconds(), reconciling.Seconds()/binding.Seconds())
	fmt.Fprintf(&b, "| peak RSS (VmHWM) with %d Compositions | %.1f MiB |\n", n, float64(hwm)/1024)
	fmt.Fprintf(&b, "| RSS at the end (VmRSS), of which the binary's mapped file (RssFile) | %.1f MiB, %.1f MiB |\n", float64(rss)/1024, float64(rssFile)/1024)
	fmt.Fprintf(&b, "| CPU of the process (user + system), to the end | %.1f s |\n", cpu.Seconds())
	fmt.Fprintf(&b, "| Go heap at the end: in use / allocated / runtime total (sys) | %.1f / %.1f / %.1f MiB |\n",
		mem["go_memstats_heap_inuse_bytes"]/(1<<20), mem["go_memstats_heap_alloc_bytes"]/(1<<20), mem["go_memstats_sys_bytes"]/(1<<20))
	fmt.Fprintf(&b, "| inventory bytes recorded (Σ inventory.json; the Secret cache holds metadata only) | %.1f MiB |\n", float64(inventoryBytes)/(1<<20))
	fmt.Fprintf(&b, "| bytes read (response bodies), all / Compositions listed and watched | %.1f / %.1f MiB |\n",
		float64(read.Total())/(1<<20), float64(read["list compositions"]+read["watch compositions"])/(1<<20))
	fmt.Fprintf(&b, "| reconcile throughput (first slice read → last write) | %.1f Compositions/s |\n", float64(n)/reconciling.Seconds())
	fmt.Fprintf(&b, "| exit after SIGTERM | %s in %.1f s |\n", exitStatus(exitErr), exitTook.Seconds())
	fmt.Fprintf(&b, "\nrequests: %s\nbytes: %s\nfailed: %s\nby client limiter: %v\n", total, read, failed, byLimiter)
	t.Log(b.String())
	if report != "" {
		require.NoError(t, os.MkdirAll(filepath.Dir(report), 0o755))
		require.NoError(t, os.WriteFile(report, []byte(b.String()), 0o644))
		t.Logf("report: %s", report)
	}
	assert.Empty(t, failed, "no request should fail")
}

// reportPath is where ENO_SCALE_REPORT asks for the report, "" for none. A relative path is
// the repository's (the Makefile's folder), not this package's: `go test` runs in test/perf.
func reportPath(t *testing.T, path string) string {
	t.Helper()
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	root, err := repoRoot()
	require.NoError(t, err)
	return filepath.Join(root, path)
}

// repoRoot is the folder of the go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}

// verifyScale checks what the binary left: every Composition has a NoInventory decision for its
// synthesis and a complete, consistent snapshot of it. It returns the inventory bytes stored.
func verifyScale(t *testing.T, a admin, ns, inv string, n int) int {
	t.Helper()
	ctx := context.Background()
	comps, err := a.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, comps.Items, n)
	secrets, err := a.Kube.CoreV1().Secrets(inv).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	byLineage := map[string][]domain.ChunkSecret{}
	bytes := 0
	for _, s := range secrets.Items {
		bytes += len(s.Data[domain.SecretDataKey])
		l := s.Labels[domain.LabelLineage]
		byLineage[l] = append(byLineage[l], domain.ChunkSecret{
			Namespace: s.Namespace, Name: s.Name, Type: string(s.Type), Labels: s.Labels,
			Annotations: s.Annotations, Data: s.Data, ResourceVersion: s.ResourceVersion,
		})
	}
	bad := 0
	for _, u := range comps.Items {
		uuid := u.Object["status"].(map[string]any)["currentSynthesis"].(map[string]any)["uuid"].(string)
		d, err := domain.ParseDecision(u.GetAnnotations()[domain.AnnotationDecision])
		comp := domain.Composition{Namespace: ns, Name: u.GetName(), UID: string(u.GetUID()), Synthesis: &domain.Synthesis{UUID: uuid}}
		snap, snapErr := domain.ReadHistory(byLineage[domain.DefaultLineage(ns, u.GetName()).String()], time.Now(), domain.DefaultMaxChunks).Verdict()
		if err != nil || d.SynthesisUUID != uuid || d.Outcome != domain.OutcomeNoInventory || snapErr != nil || !domain.SnapshotMatches(snap, comp) {
			bad++
			if bad <= 5 {
				t.Errorf("composition %s: decision %+v (%v), snapshot error %v", u.GetName(), d, err, snapErr)
			}
		}
	}
	require.Zero(t, bad, "compositions without a decision and a complete snapshot")
	return bytes
}

// scrape reads the named samples (without labels) from a Prometheus text endpoint.
func scrape(t *testing.T, url string, names ...string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec // loopback, test-chosen
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if ok && slices.Contains(names, name) {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			require.NoError(t, err)
			out[name] = v
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// procStatusKB reads a "kB" field of /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int, field string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// procCPU is the user and system CPU a process has used, from /proc/<pid>/stat (clock ticks of
// 1/100 s, as Linux reports them to user space).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(data), ") ") // the command may hold spaces
	require.True(t, ok, "/proc/%d/stat: %s", pid, data)
	f := strings.Fields(rest) // from field 3 (state): utime is field 14, stime 15
	require.Greater(t, len(f), 12)
	utime, err := strconv.Atoi(f[11])
	require.NoError(t, err)
	stime, err := strconv.Atoi(f[12])
	require.NoError(t, err)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// TestScaleReportPath: make scale names reports relative to the repository (bin/scale-1000.md),
// while go test runs in test/perf, where no bin/ exists on a fresh clone.
func TestScaleReportPath(t *testing.T) {
	root, err := repoRoot()
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(root, "Makefile"))
	assert.Equal(t, filepath.Join(root, "bin", "scale-1000.md"), reportPath(t, "bin/scale-1000.md"))
	assert.Equal(t, "/tmp/x.md", reportPath(t, "/tmp/x.md"))
	assert.Empty(t, reportPath(t, ""))
}
