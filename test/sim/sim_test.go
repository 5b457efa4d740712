package sim

import (
	"errors"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
)

func TestMain(m *testing.M) {
	// client-go's discovery cache logs through klog when a crashed replica's request fails.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	goleak.VerifyTestMain(m)
}

// TestQuietRecovery: with nothing else happening, recovery hands the orphans to Eno and Eno
// deletes them; nothing else goes.
func TestQuietRecovery(t *testing.T) {
	w, err := New(Options{Seed: 1})
	require.NoError(t, err)
	defer w.Close()
	w.Drain(4)
	w.oracle.Finish()
	t.Log(w.Trace())
	require.Empty(t, w.oracle.Violations())
	require.Empty(t, w.oracle.Leftovers(func(enomodel.Ref) bool { return true }))
	for _, ref := range w.oracle.Orphans() {
		require.Empty(t, w.truth.uidOf(ref), "%s is left", ref)
	}
}

// schedules is how many random schedules TestExplore runs: SIM_SCHEDULES, or the short run of
// `make test`.
func schedules(t *testing.T) int {
	if s := os.Getenv("SIM_SCHEDULES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	return 200
}

// TestExplore runs random schedules, each twice (Differential). A finding (a wrong deletion,
// an object only recovery lost that is no true orphan, a true orphan left with no true reason)
// that an open sequence matches is counted as that sequence found; any other fails the test,
// with its seed and trace.
func TestExplore(t *testing.T) {
	n := schedules(t)
	first := uint64(1)
	if s := os.Getenv("SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		first, n = v, 1
	}
	start, cpuStart := time.Now(), cpuTime(t)
	var mu sync.Mutex
	broken := 0
	states := map[uint64]bool{}
	found := map[string][]uint64{}
	explore(t, first, n, func(seed uint64, out Outcome) {
		var unexplained []Violation
		names := map[string]bool{}
		for _, v := range out.Violations {
			if name := openSequenceOf(out.Recovery, v); name != "" {
				names[name] = true
				continue
			}
			unexplained = append(unexplained, v)
		}
		mu.Lock()
		defer mu.Unlock()
		for s := range out.Recovery.States() {
			states[s] = true
		}
		for name := range names {
			found[name] = append(found[name], seed)
		}
		if os.Getenv("SIM_SEED") != "" {
			t.Logf("seed %d: findings %v\n%s", seed, out.Violations, out.Recovery.Trace())
		}
		if len(unexplained) > 0 {
			broken++
			t.Errorf("seed %d (replay: make sim SIM_SEED=%d): %v\n%s\n--- without recovery ---\n%s", seed, seed, unexplained, out.Recovery.Trace(), out.Plain.Trace())
		}
	})
	cpuPerMinute := float64(n) / (cpuTime(t) - cpuStart).Minutes()
	perMinute := float64(n) / time.Since(start).Minutes()
	t.Logf("%d schedules, each run twice: %.0f per minute on %d cores (%.0f per CPU-minute), %d distinct states, %d broken",
		n, perMinute, runtime.GOMAXPROCS(0), cpuPerMinute, len(states), broken)
	for _, name := range slices.Sorted(maps.Keys(found)) {
		seeds := slices.Sorted(slices.Values(found[name]))
		t.Logf("open sequence %s found by %d schedules, first seed %d: %v", name, len(seeds), seeds[0], seeds)
	}
}

// explore runs the schedules first..first+n-1 on GOMAXPROCS workers, and hands each outcome to
// judge as it is done (so that a long run keeps no world): each world is its own, so a seed
// replays the same whichever worker runs it.
func explore(t *testing.T, first uint64, n int, judge func(seed uint64, out Outcome)) {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var out Outcome
				if out, errs[i] = Differential(first+uint64(i), 300); errs[i] == nil {
					judge(first+uint64(i), out)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// cpuTime is the CPU time the test process has used, user and system: on shared cores the wall
// clock says little.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// openSequenceOf names the open sequence a finding matches, or "".
func openSequenceOf(w *World, v Violation) string {
	for _, name := range slices.Sorted(maps.Keys(openSequences)) {
		if openSequences[name].matches(w, v) {
			return name
		}
	}
	return ""
}
