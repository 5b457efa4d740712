package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// TestImageRunsTheStory runs the image's own binary under exactly the release's RBAC, with
// leader election as the Deployment runs it: record, recreate without one resource, recover (the
// hand-off to Eno), record again; then every metric the alerts and the dashboard use is exposed.
func TestImageRunsTheStory(t *testing.T) {
	applyRelease(t)
	c := env.AdminClients(t)
	ctx := kubetest.Context(t, 3*time.Minute)
	ns := c.NewNamespace(t, "image")
	waitForRBAC(t, ns)
	ctl := env.StartController(t, filepath.Join(img.rootfs, "tombstone-recovery"), controllerUser,
		"--composition-namespace="+ns, "--leader-elect", "--leader-election-namespace=eno-system")

	const name = "web"
	lineage := domain.DefaultLineage(ns, name).String()
	configMap := kubetest.Manifest("v1", "ConfigMap", ns, "web-settings", map[string]string{"app": name}, nil, nil)
	service := kubetest.Manifest("v1", "Service", ns, "web", nil, nil,
		map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": 80}}}})

	// Record.
	comp := kubetest.CreateOptedIn(t, c, ns, name)
	first := kubetest.NewSynthesis(time.Now().Add(-10*time.Minute), []kubetest.Resource{{Manifest: configMap}, {Manifest: service}})
	env.Publish(t, c, comp, first)
	assert.Equal(t, "NoInventory", kubetest.WaitForDecision(t, c, ns, name, first.UUID).Outcome.String())
	kubetest.WaitForSnapshot(t, c, "kube-system", lineage, string(comp.GetUID()), first.UUID)

	// Recreate without the Service.
	require.NoError(t, c.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	kubetest.WaitFor(t, "the composition to be gone", func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	recreated := kubetest.CreateOptedIn(t, c, ns, name)
	second := kubetest.NewSynthesis(time.Now().Add(-5*time.Minute), []kubetest.Resource{{Manifest: configMap}})
	env.Publish(t, c, recreated, second)

	// Recover: the Service is handed to Eno as a tombstone, and a synthesis is asked for.
	d := kubetest.WaitForDecision(t, c, ns, name, second.UUID)
	require.Equal(t, "Recovered", d.Outcome.String(), d.Message)
	assert.Equal(t, 1, d.Tombstones)
	kubetest.WaitFor(t, "the forced resynthesis", func(ctx context.Context) error {
		u, err := c.Dynamic.Resource(kubetest.CompositionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := u.GetAnnotations()["eno.azure.io/force-resynthesis"]; got != second.UUID {
			return fmt.Errorf("force-resynthesis is %q", got)
		}
		return nil
	})
	// Eno's carrying synthesis is recorded.
	third := kubetest.NewSynthesis(time.Now().Add(-4*time.Minute), []kubetest.Resource{{Manifest: configMap}, {Manifest: service, Deleted: true}})
	env.Publish(t, c, recreated, third)
	kubetest.WaitForSnapshot(t, c, "kube-system", lineage, string(recreated.GetUID()), third.UUID)

	// A refusal: a Composition whose lineage override is not a DNS label is left alone, with an
	// InvalidLineage event.
	_, err := kubetest.CreateComposition(ctx, c.Dynamic, domain.Composition{Namespace: ns, Name: "bad-lineage",
		Annotations: map[string]string{"eno.azure.io/tombstone-recovery": "enabled", "eno.azure.io/inventory-lineage": "Not_A_Label"}})
	require.NoError(t, err)
	kubetest.WaitFor(t, "the InvalidLineage event", func(ctx context.Context) error {
		list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-lineage"})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "InvalidLineage" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none InvalidLineage", len(list.Items))
	})

	status, body, err := kubetest.HTTPGet(ctl.MetricsURL)
	require.NoError(t, err)
	require.Equal(t, 200, status)
	exposed := exposedNames(body)
	assert.Contains(t, body, `eno_tombstone_recovery_decisions_total{outcome="Recovered",reason=""} 1`)
	assert.Contains(t, body, `eno_tombstone_recovery_refusals_total{reason="InvalidLineage"} 1`)
	assert.Contains(t, body, `eno_tombstone_recovery_cached_objects{cache="compositions"} 2`)
	used := usedMetrics(t)
	require.NotEmpty(t, used)
	for _, name := range used {
		assert.True(t, exposed[name], "%s is used by deploy/alerts.yaml or deploy/dashboard.json but the binary does not expose it", name)
	}
	ctl.Stop(t)
	assert.NotContains(t, strings.ToLower(ctl.Stderr()), "forbidden", "nothing needed more than the release grants")
}

// exposedNames are the metric names of a Prometheus text exposition, with a histogram's
// _bucket, _sum and _count series.
func exposedNames(body string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(body, -1) {
		out[m[1]] = true
		if m[2] == "histogram" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[m[1]+s] = true
			}
		}
	}
	return out
}

// usedMetrics are the eno_tombstone_recovery_* names in the expressions of deploy/alerts.yaml
// and deploy/dashboard.json.
func usedMetrics(t *testing.T) []string {
	t.Helper()
	var exprs []string
	alerts, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "alerts.yaml"))
	require.NoError(t, err)
	// An expr is one line, or a folded block (>-) of the lines indented below it.
	lines := strings.Split(string(alerts), "\n")
	for i, l := range lines {
		key, rest, ok := strings.Cut(strings.TrimSpace(l), "expr:")
		if !ok || key != "" {
			continue
		}
		expr := strings.TrimSpace(rest)
		if expr == ">-" || expr == ">" || expr == "|" {
			indent := len(l) - len(strings.TrimLeft(l, " "))
			expr = ""
			for _, next := range lines[i+1:] {
				if len(next)-len(strings.TrimLeft(next, " ")) <= indent {
					break
				}
				expr += " " + strings.TrimSpace(next)
			}
		}
		exprs = append(exprs, expr)
	}
	require.NotEmpty(t, exprs, "deploy/alerts.yaml has expressions")
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "dashboard.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &dash))
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has a query", p.Title)
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	names := map[string]bool{}
	for _, e := range exprs {
		found := regexp.MustCompile(`eno_tombstone_recovery_[a-z_]+`).FindAllString(e, -1)
		require.NotEmpty(t, found, "expression %q uses a metric of the product", e)
		for _, n := range found {
			names[n] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// readRootFile reads a file of the unpacked image.
func readRootFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(img.rootfs, filepath.FromSlash(name)))
	require.NoError(t, err)
	return string(b)
}
