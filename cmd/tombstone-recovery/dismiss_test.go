package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// keptSnapshot stores a one-chunk snapshot of webEntries for <ns>/web, a gone Composition of the
// default lineage, whose chunk 0 carries us, as recording writes it, and returns its name.
func keptSnapshot(t *testing.T, c kubetest.Clients, ns string, us ...domain.Unresolved) string {
	t.Helper()
	return keptSnapshotIn(t, c, ns, domain.DefaultLineage(ns, "web"), us...)
}

func keptSnapshotIn(t *testing.T, c kubetest.Clients, ns string, l domain.Lineage, us ...domain.Unresolved) string {
	t.Helper()
	inv, err := domain.NewInventory(webEntries())
	require.NoError(t, err)
	chunks, err := domain.SplitInventory(inv, domain.DefaultMaxChunkBytes, 0)
	require.NoError(t, err)
	cs := domain.WithUnresolved(domain.DesiredChunkSecret(domain.DefaultInventoryNamespace, domain.SnapshotMeta{Lineage: l, CompositionNamespace: ns,
		CompositionName: "web", CompositionUID: "0ld0ld00-0000-4000-8000-000000000000", SynthesisUUID: recreatedSourceUUID,
		SynthesisTime: time.Now().Add(-time.Hour).UTC().Truncate(time.Second), ChunkCount: 1, Digest: inv.Digest(), ControlPlane: localControlPlane(t, c)}, chunks[0]), us)
	putSecret(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cs.Namespace, Name: cs.Name, Labels: cs.Labels, Annotations: cs.Annotations},
		Type: corev1.SecretType(cs.Type), Data: cs.Data})
	return cs.Name
}

func keptEntry(name string) domain.Unresolved {
	return domain.Unresolved{Version: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: name, UID: "u-" + name,
		Reason: "ManagedElsewhere", Detail: "argocd manages it", Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), SourceSynthesisUUID: recreatedNowUUID}
}

func secretAnnotations(t *testing.T, c kubetest.Clients, name string) map[string]string {
	t.Helper()
	s, err := c.Kube.CoreV1().Secrets(domain.DefaultInventoryNamespace).Get(testCtx(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	return s.Annotations
}

// dismiss shows the entries, asks, and adds them to the dismissal annotation: inspect then no
// longer lists them, and a second dismiss finds nothing.
func TestDismissShowsAsksAndWrites(t *testing.T) {
	c := testEnv.AdminClients(t)
	ns := c.NewNamespace(t, "dismiss")
	name := keptSnapshot(t, c, ns, keptEntry("a"), keptEntry("b"))
	admin := kubeconfigOf(t, "")

	_, err := review(t, "no\n", "dismiss", ns+"/web", "--kubeconfig", admin)
	require.EqualError(t, err, "dismiss: not confirmed; nothing written")
	assert.NotContains(t, secretAnnotations(t, c, name), domain.AnnotationUnresolvedDismissed)

	out, err := review(t, "yes\n", "dismiss", "--kubeconfig", admin, ns+"/web")
	t.Log("\n" + out)
	require.NoError(t, err)
	hasLine(t, out, `^UNRESOLVED in secret kube-system/`+name+` \(2\)$`)
	hasLine(t, out, `^OBJECT\s+UID\s+REASON\s+SINCE\s+KEPT BY SYNTHESIS\s+DETAIL$`)
	hasLine(t, out, `^ConfigMap/team-a/a\s+u-a\s+ManagedElsewhere\s+2026-01-02T03:04:05Z\s+`+recreatedNowUUID+`\s+argocd manages it$`)
	hasLine(t, out, `^ConfigMap/team-a/b\s+u-b\s`)
	hasLine(t, out, `Type yes to go on: Dismissed 2 entries on secret kube-system/`+name+`\.$`)
	assert.JSONEq(t, `{"snapshot":"`+recreatedSourceUUID+`","ids":["ConfigMap/team-a/a","ConfigMap/team-a/b"]}`,
		secretAnnotations(t, c, name)[domain.AnnotationUnresolvedDismissed])

	_, err = review(t, "", "dismiss", ns+"/web", "--kubeconfig", admin, "--yes")
	require.EqualError(t, err, "dismiss: composition "+ns+"/web has no unresolved entries in lineage "+domain.DefaultLineage(ns, "web").String()+" of kube-system downstream; nothing to dismiss")
}

// A Secret changed between the read and the write is not written: the operator sees it again.
func TestDismissRefusesAChangedSecret(t *testing.T) {
	c := testEnv.AdminClients(t)
	ns := c.NewNamespace(t, "dismiss")
	name := keptSnapshot(t, c, ns, keptEntry("a"))
	_, err := reviewWith(t, &changeSecretWhileAsked{t: t, c: c, name: name}, "dismiss", ns+"/web", "--kubeconfig", kubeconfigOf(t, ""))
	require.ErrorContains(t, err, "dismiss: secret kube-system/"+name+" changed since it was read (resourceVersion ")
	assert.NotContains(t, secretAnnotations(t, c, name), domain.AnnotationUnresolvedDismissed)
}

// changeSecretWhileAsked answers yes after another writer changed the Secret.
type changeSecretWhileAsked struct {
	t    *testing.T
	c    kubetest.Clients
	name string
	done bool
}

func (a *changeSecretWhileAsked) Read(p []byte) (int, error) {
	if !a.done {
		a.done = true
		secrets := a.c.Kube.CoreV1().Secrets(domain.DefaultInventoryNamespace)
		s, err := secrets.Get(testCtx(a.t), a.name, metav1.GetOptions{})
		require.NoError(a.t, err)
		s.Annotations["example.com/touched"] = "yes"
		_, err = secrets.Update(testCtx(a.t), s, metav1.UpdateOptions{})
		require.NoError(a.t, err)
	}
	return copy(p, "yes\n"), nil
}

// A living Composition's lineage is its own, override included.
func TestDismissReadsTheCompositionsLineage(t *testing.T) {
	c := testEnv.AdminClients(t)
	ns := c.NewNamespace(t, "dismiss")
	l, err := domain.NewLineage(uniqueLineage("dismiss"))
	require.NoError(t, err)
	_, err = kubetest.CreateComposition(testCtx(t), c.Dynamic, domain.Composition{Namespace: ns, Name: "web",
		Annotations: map[string]string{domain.AnnotationOptIn: domain.OptInValue, domain.AnnotationLineageOverride: l.String()}})
	require.NoError(t, err)
	// Unsynthesized, it would hold every other test's hand-off (design §6.3, first syntheses).
	t.Cleanup(func() {
		assert.NoError(t, c.Dynamic.Resource(k8s.CompositionGVR).Namespace(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}))
	})
	name := keptSnapshotIn(t, c, ns, l, keptEntry("a"))
	out, err := review(t, "", "dismiss", ns+"/web", "--kubeconfig", kubeconfigOf(t, ""), "--yes")
	require.NoError(t, err, out)
	hasLine(t, out, `^Dismissed 1 entries on secret kube-system/`+name+`\.$`)
}
