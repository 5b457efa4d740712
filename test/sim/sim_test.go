package sim

import (
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
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
	t.Log(w.Trace())
	require.Empty(t, w.oracle.Violations())
	require.Empty(t, w.oracle.Unfinished(t.Context()))
}

// schedules is how many random schedules TestExplore runs: SIM_SCHEDULES, or the short run of
// `make test` (under two minutes with -race on two cores).
func schedules(t *testing.T) int {
	if s := os.Getenv("SIM_SCHEDULES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	return 12
}

// TestExplore runs random schedules. A schedule that breaks the promise (a wrong deletion, or
// orphans left with nothing said) fails the test, with its seed and trace.
func TestExplore(t *testing.T) {
	n := schedules(t)
	first := uint64(1)
	if s := os.Getenv("SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		first, n = v, 1
	}
	start := time.Now()
	broken := 0
	states := map[uint64]bool{}
	for seed := first; seed < first+uint64(n); seed++ {
		w, violations, unfinished, err := Run(RandomOptions(seed), 300)
		require.NoError(t, err)
		for s := range w.States() {
			states[s] = true
		}
		if len(violations) == 0 && len(unfinished) == 0 {
			continue
		}
		broken++
		t.Errorf("seed %d (replay: make sim SIM_SEED=%d): violations %v, unfinished %v\n%s", seed, seed, violations, unfinished, w.Trace())
	}
	perMinute := float64(n) / time.Since(start).Minutes()
	t.Logf("%d schedules (%.0f per minute), %d distinct states, %d broken", n, perMinute, len(states), broken)
}
