package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplay: a seed replays its schedule: two runs of one seed leave the same trace.
func TestReplay(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		first, _, _, err := Run(RandomOptions(seed), 300)
		require.NoError(t, err)
		again, _, _, err := Run(RandomOptions(seed), 300)
		require.NoError(t, err)
		require.Equal(t, first.Trace(), again.Trace(), "seed %d replays a different schedule", seed)
	}
}
