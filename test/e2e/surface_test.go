package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOperatorSurface checks what an operator watches on a running binary: probes, metrics
// after a pass, and events on the Composition. It stops the binary with SIGINT.
func TestOperatorSurface(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "surface")
	ctl := startController(t, "", "--composition-namespace="+ns)

	for _, path := range []string{"/healthz", "/readyz"} {
		status, body, err := httpGet(ctl.HealthURL + path)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	}
	assert.Contains(t, ctl.Stderr(), `"msg":"caches synced"`, "/readyz answered 200 only after the caches synced")

	const name = "shop"
	comp := createComposition(t, c, ns, name)
	syn := newSynthesis(time.Now().Add(-time.Minute), []resource{
		{Manifest: object("v1", "ConfigMap", ns, "shop", map[string]string{"app": "shop"}, nil, nil)},
	})
	publish(t, c, comp, syn)
	waitForDecision(t, c, ns, name, syn.UUID)
	waitForSnapshot(t, c, "kube-system", lineageOf(ns, name), string(comp.GetUID()), syn.UUID)

	// The pass is counted once the decision and the chunk are written.
	want := map[string]func(float64) bool{
		`eno_tombstone_recovery_decisions_total{outcome="NoInventory",reason=""}`: func(v float64) bool { return v >= 1 },
		`eno_tombstone_recovery_chunk_writes_total{result="created"}`:             func(v float64) bool { return v >= 1 },
		`eno_tombstone_recovery_snapshots_total{result="written"}`:                func(v float64) bool { return v >= 1 },
		// controller-runtime's work queue metrics; the queue keeps its name.
		`workqueue_depth{name="compositions"}`:                                      func(v float64) bool { return v >= 0 },
		`workqueue_adds_total{name="compositions"}`:                                 func(v float64) bool { return v >= 1 },
		`eno_tombstone_recovery_reconcile_duration_seconds_count{result="success"}`: func(v float64) bool { return v >= 1 },
	}
	waitFor(t, "metrics of the pass", func(context.Context) error {
		status, body, err := httpGet(ctl.MetricsURL)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("/metrics answered %d", status)
		}
		samples := parseSamples(body)
		for series, ok := range want {
			v, found := lookup(samples, series)
			if !found {
				return fmt.Errorf("%s is not exposed", series)
			}
			if !ok(v) {
				return fmt.Errorf("%s = %g", series, v)
			}
		}
		return nil
	})

	decided := waitForEvent(t, c, ns, name, "NoInventory")
	assert.Equal(t, "Normal", decided.Type)
	assert.Equal(t, "eno-tombstone-recovery", decided.Source.Component)
	assert.Equal(t, comp.GetUID(), decided.InvolvedObject.UID)
	assert.Equal(t, "eno.azure.io/v1", decided.InvolvedObject.APIVersion)
	recorded := waitForEvent(t, c, ns, name, "InventoryRecorded")
	assert.Equal(t, "Normal", recorded.Type)

	ctl.Stop(t, syscall.SIGINT)
}

// lookup finds series, or else a series of the same metric carrying at least its labels.
func lookup(samples map[string]float64, series string) (float64, bool) {
	if v, ok := samples[series]; ok {
		return v, true
	}
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	for key, v := range samples {
		keyName, keyLabels, _ := strings.Cut(strings.TrimSuffix(key, "}"), "{")
		if keyName != name {
			continue
		}
		all := true
		for _, l := range strings.Split(labels, ",") {
			all = all && strings.Contains(","+keyLabels+",", ","+l+",")
		}
		if all {
			return v, true
		}
	}
	return 0, false
}

// parseSamples reads the Prometheus text format into series (name with labels) and values.
func parseSamples(body string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// TestNotReadyUntilSynced runs the binary as a user without RBAC: it reaches the API server
// but its caches never sync, so /readyz stays 503 while /healthz is 200, and SIGTERM still
// ends it cleanly.
func TestNotReadyUntilSynced(t *testing.T) {
	ctl := launchController(t, unprivilegedUser, "/healthz")
	// The failing lists are logged; by then the binary has tried, and still is not ready.
	waitFor(t, "a forbidden list in the logs", func(context.Context) error {
		if !strings.Contains(ctl.Stderr(), "forbidden") {
			return fmt.Errorf("no forbidden list logged yet")
		}
		return nil
	})
	status, body, err := httpGet(ctl.HealthURL + "/readyz")
	require.NoError(t, err)
	// controller-runtime's /readyz answers a failing check with 500 (kubelet: any status from
	// 400 on is a failure).
	assert.Equal(t, http.StatusInternalServerError, status, body)
	assert.NotContains(t, ctl.Stderr(), `"msg":"caches synced"`)

	ctl.ExitCleanly(t)
	assert.Contains(t, ctl.Stderr(), `"msg":"stopped before the caches synced"`)
}
