package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// chunkLimit is the --max-chunk-bytes of TestChunkSizes: small enough for several chunks.
const chunkLimit = 1024

// configMaps builds n ConfigMap entries whose names start with prefix, each with pad bytes of
// label values, and the manifests that produce them.
func configMaps(ns, prefix string, n, pad int) ([]domain.Entry, []resource) {
	var entries []domain.Entry
	var resources []resource
	for i := range n {
		e, r := paddedConfigMap(ns, fmt.Sprintf("%s-%02d", prefix, i), pad)
		entries = append(entries, e)
		resources = append(resources, r)
	}
	return entries, resources
}

// paddedConfigMap is one ConfigMap entry with pad bytes of label values, spread over as many
// labels as the API server's limit of 63 bytes a value needs, so that publish can apply it.
func paddedConfigMap(ns, name string, pad int) (domain.Entry, resource) {
	labels := map[string]string{}
	for i := 0; pad > 0; i++ {
		n := min(pad, 63)
		labels[fmt.Sprintf("pad-%02d", i)] = strings.Repeat("x", n)
		pad -= n
	}
	return domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: name, Labels: labels},
		resource{Manifest: object("v1", "ConfigMap", ns, name, labels, nil, nil)}
}

func mustInventory(t *testing.T, entries []domain.Entry) domain.Inventory {
	t.Helper()
	inv, err := domain.NewInventory(entries)
	require.NoError(t, err)
	return inv
}

// assertChunks checks the Secrets hold exactly the chunks, in index order, and that the split
// is greedy: each chunk is within the limit and the next chunk's first entry would not fit it.
func assertChunks(t *testing.T, secrets []corev1.Secret, inv domain.Inventory, chunks []domain.Chunk) {
	t.Helper()
	require.Len(t, secrets, len(chunks))
	for i, s := range secrets {
		data := s.Data[dataKey]
		assert.Equal(t, strconv.Itoa(i), s.Annotations["eno.azure.io/inventory-chunk-index"], s.Name)
		assert.Equal(t, strconv.Itoa(len(chunks)), s.Annotations["eno.azure.io/inventory-chunk-count"], s.Name)
		assert.Equal(t, inv.Digest(), s.Annotations["eno.azure.io/inventory-digest"], s.Name)
		assert.Equal(t, string(chunks[i].Data()), string(data), s.Name)
		assert.LessOrEqual(t, len(data), chunkLimit, s.Name)
		if i+1 < len(secrets) {
			next, err := domain.DecodeEntries(secrets[i+1].Data[dataKey])
			require.NoError(t, err)
			require.NotEmpty(t, next)
			first := mustInventory(t, next[:1]).Size() - 2 // without the brackets
			assert.Greater(t, len(data)+1+first, chunkLimit, "%s could have taken the next entry", s.Name)
		}
	}
}

// TestChunkSizes runs the binary with a small --max-chunk-bytes and a separate inventory
// namespace: a chunk of exactly the limit, several chunks, an empty inventory, and an entry
// over the limit.
func TestChunkSizes(t *testing.T) {
	c := env.AdminClients(t)
	ns := c.NewNamespace(t, "chunks")
	inventoryNS := c.NewNamespace(t, "inventory")
	ctl := startController(t, "", "--composition-namespace="+ns, "--inventory-namespace="+inventoryNS,
		"--max-chunk-bytes="+strconv.Itoa(chunkLimit))
	at := time.Now().Add(-time.Minute)

	t.Run("a chunk of exactly the limit", func(t *testing.T) {
		// Two entries padded so that the canonical inventory is chunkLimit bytes: the first by
		// about half, the second by what makes the size exact (a new label adds its key too, so
		// some sizes are skipped; then the first gives up a byte).
		base, _ := configMaps(ns, "exact", 2, 0)
		var entries []domain.Entry
		var resources []resource
	search:
		for pad0 := (chunkLimit - mustInventory(t, base).Size()) / 2; pad0 > 0; pad0-- {
			e0, r0 := paddedConfigMap(ns, "exact-00", pad0)
			for pad1 := 0; pad1 < chunkLimit; pad1++ {
				e1, r1 := paddedConfigMap(ns, "exact-01", pad1)
				switch size := mustInventory(t, []domain.Entry{e0, e1}).Size(); {
				case size == chunkLimit:
					entries, resources = []domain.Entry{e0, e1}, []resource{r0, r1}
					break search
				case size > chunkLimit:
					continue search
				}
			}
		}
		require.NotEmpty(t, entries, "no padding makes the inventory exactly %d bytes", chunkLimit)
		inv := mustInventory(t, entries)
		require.Equal(t, chunkLimit, inv.Size())

		comp := createComposition(t, c, ns, "exact")
		syn := newSynthesis(at, resources)
		publish(t, c, comp, syn)
		_, secrets := waitForSnapshot(t, c, inventoryNS, lineageOf(ns, "exact"), string(comp.GetUID()), syn.UUID)
		require.Len(t, secrets, 1, "an inventory of exactly --max-chunk-bytes fits one chunk")
		assert.Equal(t, "1", secrets[0].Annotations["eno.azure.io/inventory-chunk-count"])
		assert.Len(t, secrets[0].Data[dataKey], chunkLimit)
		assert.Equal(t, string(inv.Canonical()), string(secrets[0].Data[dataKey]))
	})

	t.Run("several chunks", func(t *testing.T) {
		entries, resources := configMaps(ns, "many", 12, 150)
		inv := mustInventory(t, entries)
		chunks, err := domain.SplitInventory(inv, chunkLimit, 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(chunks), 3)

		comp := createComposition(t, c, ns, "many")
		// Spread over three slices, out of canonical order.
		syn := newSynthesis(at, resources[8:], resources[:4], resources[4:8])
		publish(t, c, comp, syn)
		snap, secrets := waitForSnapshot(t, c, inventoryNS, lineageOf(ns, "many"), string(comp.GetUID()), syn.UUID)
		assertChunks(t, secrets, inv, chunks)
		for i, s := range secrets {
			assert.Equal(t, fmt.Sprintf("many-%s-%d", lineageOf(ns, "many"), i), s.Name)
		}
		assert.Equal(t, inv.Digest(), snap.Meta().Digest)
		assert.Equal(t, 12, snap.Inventory().Len())
	})

	t.Run("an empty inventory", func(t *testing.T) {
		comp := createComposition(t, c, ns, "empty")
		// Only a Patch and a tombstone: nothing the inventory holds.
		syn := newSynthesis(at, []resource{
			{Manifest: patchOf("v1", "ConfigMap", ns, "someone-elses")},
			{Manifest: object("v1", "ConfigMap", ns, "gone", nil, nil, nil), Deleted: true},
		})
		publish(t, c, comp, syn)
		_, secrets := waitForSnapshot(t, c, inventoryNS, lineageOf(ns, "empty"), string(comp.GetUID()), syn.UUID)
		require.Len(t, secrets, 1)
		assert.Equal(t, "[]", string(secrets[0].Data[dataKey]))
		sum := sha256.Sum256([]byte("[]"))
		assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), secrets[0].Annotations["eno.azure.io/inventory-digest"])
		assert.Equal(t, "1", secrets[0].Annotations["eno.azure.io/inventory-chunk-count"])
	})

	t.Run("an entry over the limit is refused", func(t *testing.T) {
		entries, resources := configMaps(ns, "huge", 1, chunkLimit)
		_, err := domain.SplitInventory(mustInventory(t, entries), chunkLimit, 0)
		require.Error(t, err)

		comp := createComposition(t, c, ns, "huge")
		syn := newSynthesis(at, resources)
		publish(t, c, comp, syn)
		assert.Equal(t, "NoInventory", waitForDecision(t, c, ns, "huge", syn.UUID).Outcome.String())
		refused := waitForEvent(t, c, ns, "huge", "InventoryTooLarge")
		assert.Equal(t, "Warning", refused.Type)
		list, err := c.Kube.CoreV1().Secrets(inventoryNS).List(testContext(t), metav1.ListOptions{LabelSelector: lineageLabel + "=" + lineageOf(ns, "huge")})
		require.NoError(t, err)
		assert.Empty(t, list.Items, "nothing is written when an entry exceeds the limit")
	})

	ctl.Stop(t)
}
