package domain

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks of the recording and reading pipelines, each next to its floor: the cost of
// plain encoding/json plus one sha256 over the same data. Compare ratios measured in the
// same run; absolute figures on shared machines are noisy. See BENCHMARKS.md.

var benchSizes = []struct {
	name string
	n    int
}{{"1k", 1_000}, {"10k", 10_000}, {"100k", 100_000}}

var benchKinds = []struct{ group, version, kind string }{
	{"", "v1", "ConfigMap"},
	{"", "v1", "Secret"},
	{"", "v1", "Service"},
	{"", "v1", "ServiceAccount"},
	{"apps", "v1", "Deployment"},
	{"apps", "v1", "StatefulSet"},
	{"batch", "v1", "CronJob"},
	{"networking.k8s.io", "v1", "NetworkPolicy"},
	{"policy", "v1", "PodDisruptionBudget"},
	{"rbac.authorization.k8s.io", "v1", "Role"},
	{"rbac.authorization.k8s.io", "v1", "ClusterRole"},
	{"monitoring.coreos.com", "v1", "ServiceMonitor"},
}

var benchWords = []string{"payments", "gateway", "frontend", "inventory", "search", "checkout",
	"identity", "telemetry", "billing", "ingress", "scheduler", "notifications"}

// benchEntries returns n distinct, realistic entries in a deterministic, non-canonical
// order (a synthesizer emits resources in its own order).
func benchEntries(n int) []Entry {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	out := make([]Entry, n)
	for i := range out {
		k := benchKinds[i%len(benchKinds)]
		app := benchWords[(i/7)%len(benchWords)]
		comp := benchWords[(i/3+5)%len(benchWords)]
		ns := ""
		if k.kind != "ClusterRole" {
			ns = "team-" + benchWords[(i/11)%len(benchWords)]
		}
		// 60 characters, unique by the index at the end.
		hash := strconv.FormatUint(uint64(rng.Uint32())|1<<32, 16)[1:] // 8 hex digits
		prefix := app + "-" + comp + "-" + strings.ToLower(k.kind) + "-westeurope-prod-" + hash + "-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		suffix := strconv.Itoa(i)
		name := prefix[:60-len(suffix)] + suffix
		out[i] = Entry{
			Group: k.group, Version: k.version, Kind: k.kind, Namespace: ns, Name: name,
			Labels: map[string]string{
				"app.kubernetes.io/name":       app,
				"app.kubernetes.io/instance":   app + "-" + comp,
				"app.kubernetes.io/component":  comp,
				"app.kubernetes.io/part-of":    "platform-" + benchWords[i%len(benchWords)],
				"app.kubernetes.io/managed-by": "eno",
			},
			Annotations: map[string]string{
				AnnotationReadinessGroup: strconv.Itoa(i%4 - 1),
				AnnotationDeletionGroup:  strconv.Itoa(i%3 - 1),
			},
		}
	}
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// benchManifest renders e as the manifest a synthesizer would emit, with a spec the
// recorder must skip over.
func benchManifest(e Entry) string {
	ann := map[string]string{"eno.azure.io/reconcile-interval": "5m",
		"checksum/config": "3f1c2a9b7e4d5c6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f"}
	for k, v := range e.Annotations {
		ann[k] = v
	}
	md := map[string]any{"name": e.Name, "labels": e.Labels, "annotations": ann}
	if e.Namespace != "" {
		md["namespace"] = e.Namespace
	}
	m := map[string]any{
		"apiVersion": e.APIVersion(), "kind": e.Kind, "metadata": md,
		"spec": map[string]any{"replicas": 3, "selector": map[string]any{"matchLabels": e.Labels},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
				"name": "main", "image": "mcr.microsoft.com/example/" + e.Name + ":1.2.3",
				"args": []string{"--port=8080", "--log-level=info"}}}}}},
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

const benchSynUUID = "11111111-2222-3333-4444-555555555555"

func benchSlices(entries []Entry, perSlice int) (Composition, []ResourceSlice) {
	c := Composition{Namespace: "team-a", Name: "web", UID: "uid-1",
		Synthesis: &Synthesis{UUID: benchSynUUID, Synthesized: time.Unix(1700000000, 0), Ready: true}}
	var slices []ResourceSlice
	for i := 0; i < len(entries); i += perSlice {
		s := ResourceSlice{Namespace: c.Namespace, Name: fmt.Sprintf("web-%d", len(slices)), SynthesisUUID: benchSynUUID}
		for _, e := range entries[i:min(i+perSlice, len(entries))] {
			s.Resources = append(s.Resources, SliceResource{Manifest: benchManifest(e)})
		}
		c.Synthesis.Slices = append(c.Synthesis.Slices, s.Name)
		slices = append(slices, s)
	}
	return c, slices
}

func benchSecrets(tb testing.TB, inv Inventory) []ChunkSecret {
	chunks, err := SplitInventory(inv, DefaultMaxChunkBytes, 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	m := SnapshotMeta{Lineage: DefaultLineage("team-a", "web"), CompositionNamespace: "team-a",
		CompositionName: "web", CompositionUID: "uid-1", SynthesisUUID: benchSynUUID,
		SynthesisTime: time.Unix(1700000000, 0).UTC(), ChunkCount: len(chunks), Digest: inv.Digest()}
	out := make([]ChunkSecret, len(chunks))
	for i, c := range chunks {
		out[i] = DesiredChunkSecret(DefaultInventoryNamespace, m, c)
	}
	return out
}

func BenchmarkRecord(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			entries := benchEntries(size.n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				inv, err := NewInventory(entries)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := SplitInventory(inv, 1<<20, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecordFloor(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			entries := benchEntries(size.n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				data, err := json.Marshal(entries)
				if err != nil {
					b.Fatal(err)
				}
				_ = sha256.Sum256(data)
			}
		})
	}
}

func BenchmarkReadSynthesis(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			c, slices := benchSlices(benchEntries(size.n), 200)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				got, err := ReadSynthesis(c, slices)
				if err != nil {
					b.Fatal(err)
				}
				if got.Inventory().Len() != size.n {
					b.Fatalf("got %d entries, want %d", got.Inventory().Len(), size.n)
				}
			}
		})
	}
}

// BenchmarkReadSnapshot reads the history as recovery does, for a recreated Composition.
func BenchmarkReadSnapshot(b *testing.B) {
	now := time.Unix(1700000000, 0).Add(time.Hour)
	reader := Composition{Namespace: "team-a", Name: "web", UID: "uid-2"}
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			inv, err := NewInventory(benchEntries(size.n))
			if err != nil {
				b.Fatal(err)
			}
			secrets := benchSecrets(b, inv)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				snap, err := ReadSnapshotFor(reader, secrets, now, 1<<20, AdoptWithinNamespace)
				if err != nil {
					b.Fatal(err)
				}
				if snap.Inventory().Len() != size.n {
					b.Fatalf("got %d entries, want %d", snap.Inventory().Len(), size.n)
				}
			}
		})
	}
}

func BenchmarkReadSnapshotFloor(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			inv, err := NewInventory(benchEntries(size.n))
			if err != nil {
				b.Fatal(err)
			}
			canonical := inv.Canonical()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				var entries []Entry
				if err := json.Unmarshal(canonical, &entries); err != nil {
					b.Fatal(err)
				}
				_ = sha256.Sum256(canonical)
			}
		})
	}
}

// BenchmarkRecording is the real path of the inventory format: one recording per synthesis,
// as app does it (ReadSynthesis, SplitInventory at the default limit, one DesiredChunkSecret per
// chunk), for syntheses of 50 to 10,000 resources, 100 manifests per slice. Its baseline is
// what the same recording costs at the binary's client QPS (--kube-api-qps=50): at least s + 2n + 3
// requests for s slices and n chunks (BENCHMARKS.md, API cost per reconcile), 20 ms each.
// x-qps50-floor is the CPU time as a share of that.
func BenchmarkRecording(b *testing.B) {
	for _, n := range []int{50, 500, 1_000, 10_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			c, slices := benchSlices(benchEntries(n), 100)
			meta := SnapshotMeta{Lineage: DefaultLineage(c.Namespace, c.Name), CompositionNamespace: c.Namespace,
				CompositionName: c.Name, CompositionUID: c.UID, SynthesisUUID: benchSynUUID, SynthesisTime: c.Synthesis.Synthesized}
			chunks := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				got, err := ReadSynthesis(c, slices)
				if err != nil {
					b.Fatal(err)
				}
				inv := got.Inventory()
				parts, err := SplitInventory(inv, DefaultMaxChunkBytes, DefaultMaxChunks)
				if err != nil {
					b.Fatal(err)
				}
				meta.ChunkCount, meta.Digest = len(parts), inv.Digest()
				for _, p := range parts {
					_ = DesiredChunkSecret(DefaultInventoryNamespace, meta, p)
				}
				chunks = len(parts)
			}
			floor := float64(len(slices)+2*chunks+3) * float64(time.Second) / 50
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/floor, "x-qps50-floor")
		})
	}
}
