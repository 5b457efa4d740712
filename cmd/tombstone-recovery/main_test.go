package main

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

var updateGolden = flag.Bool("update", false, "rewrite the inspect golden files under testdata from the output")

// testEnv is the real etcd and kube-apiserver the package's tests share (inspect runs against it).
var testEnv *kubetest.Env

// TestMain starts the API server; TestMainWithEnv stops it and then runs goleak over the package.
func TestMain(m *testing.M) {
	kubetest.TestMainWithEnv(m, kubetest.Options{Users: []kubetest.User{{Name: inspectReader}}}, func(e *kubetest.Env) int {
		testEnv = e
		return m.Run()
	})
}

func TestDispatchRejectsUnknownCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	require.ErrorIs(t, dispatch(context.Background(), []string{"nope"}, &out, &errOut), errUsage)
	require.Error(t, dispatch(context.Background(), nil, &out, &errOut))
	require.NoError(t, dispatch(context.Background(), []string{"-h"}, &out, &errOut))
}

// demo -h prints its usage instead of running the demo; other arguments are refused.
func TestDemoHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, dispatch(context.Background(), []string{"demo", "-h"}, &out, &errOut))
	require.Empty(t, out.String(), "the demo ran")
	require.Contains(t, errOut.String(), "usage: tombstone-recovery demo")
	require.EqualError(t, dispatch(context.Background(), []string{"demo", "--fast"}, &out, &errOut), `demo: takes no arguments, got ["--fast"]`)
}

// Every command's -h documents its exit codes.
func TestEveryCommandDocumentsItsExitCodes(t *testing.T) {
	for _, cmd := range []string{"run", "demo", "inspect", "prune", "version", "approve", "reject"} {
		var out, errOut bytes.Buffer
		require.NoError(t, dispatch(context.Background(), []string{cmd, "-h"}, &out, &errOut), cmd)
		require.Contains(t, errOut.String(), "Exit codes: 0 ", cmd)
	}
	var out, errOut bytes.Buffer
	require.NoError(t, dispatch(context.Background(), []string{"-h"}, &out, &errOut))
	require.Contains(t, out.String(), "inspect --all exits 3 when\na row needs a person")
}
