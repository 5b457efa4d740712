package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// testEnv is the real etcd and kube-apiserver the package's tests share (inspect runs against it).
var testEnv *kubetest.Env

// TestMain starts the API server; TestMainWithEnv stops it and then runs goleak over the package.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{Name: inspectReader}}}, func(e *kubetest.Env) int {
		testEnv = e
		return m.Run()
	})
}

func TestDemoTellsTheWholeStory(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runDemo(context.Background(), &out))
	story := out.String()
	for _, want := range []string{
		"recovery decision for team-a/web: Recovered",
		"tombstone: ConfigMap/team-a/web-feature-flags",
		"tombstone: CronJob.batch/team-a/web-cleanup",
		"tombstones published in ResourceSlice team-a/web-recovery-",
		"inventory of lineage a6d6889313c2 unchanged",
		"recovery decision for team-b/api: InventoryInvalid (MissingChunk)",
		"recovery decision for shop/checkout-west: InventoryInvalid (AmbiguousTimestamp)",
		"recovery decision for team-c/db: HeldForReview (OverDeletionGuard)",
		"recovery decision for team-c/db: Recovered (Approved)",
	} {
		assert.Contains(t, story, want)
	}
}

func TestDemoIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	require.NoError(t, runDemo(context.Background(), &a))
	require.NoError(t, runDemo(context.Background(), &b))
	assert.Equal(t, a.String(), b.String())
}

func TestDispatchRejectsUnknownCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	require.ErrorIs(t, dispatch(context.Background(), []string{"nope"}, &out, &errOut), errUsage)
	require.Error(t, dispatch(context.Background(), nil, &out, &errOut))
	require.NoError(t, dispatch(context.Background(), []string{"-h"}, &out, &errOut))
}
