package sim

import (
	"io"
	"os"
	"strconv"
	"testing"

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

// schedules is how many random schedules TestExplore runs: SIM_SCHEDULES, or a short run.
func schedules(t *testing.T) int {
	if s := os.Getenv("SIM_SCHEDULES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	return 40
}

// TestExplore runs random schedules; each prints its seed and trace when it breaks the promise.
func TestExplore(t *testing.T) {
	n := schedules(t)
	first := uint64(1)
	if s := os.Getenv("SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		first, n = v, 1
	}
	byRule := map[string]int{}
	for seed := first; seed < first+uint64(n); seed++ {
		opts := RandomOptions(seed)
		w, violations, unfinished, err := Run(opts, 300)
		require.NoError(t, err)
		for _, v := range violations {
			byRule[v.Rule]++
		}
		if len(violations) > 0 || len(unfinished) > 0 {
			t.Errorf("seed %d (replay: SIM_SEED=%d make sim): violations %v, unfinished %v\n%s", seed, seed, violations, unfinished, w.Trace())
		}
	}
	t.Logf("%d schedules, violations by rule: %v", n, byRule)
}
