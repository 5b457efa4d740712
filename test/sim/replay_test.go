package sim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplay: a seed replays its schedule: two runs of one seed leave the same trace. The seed
// is the first with two replicas, crashes and an adversary, so that most kinds of step run.
func TestReplay(t *testing.T) {
	seed := uint64(1)
	for o := RandomOptions(seed); o.Replicas < 2 || !o.Crashes || len(o.Adversaries) == 0; o = RandomOptions(seed) {
		seed++
	}
	first, err := Run(RandomOptions(seed), 300)
	require.NoError(t, err)
	again, err := Run(RandomOptions(seed), 300)
	require.NoError(t, err)
	require.Equal(t, first.Trace(), again.Trace(), "seed %d replays a different schedule", seed)
}
