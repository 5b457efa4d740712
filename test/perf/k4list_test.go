package perf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// BenchmarkK4SliceList measures the fleet index (design §6.3, K4): its one list of every
// ResourceSlice, manifests included, since the server cannot project fields, and the heap it
// keeps once the transform dropped them. The slices are those of ENO_K4_COMPOSITIONS
// Compositions (default 100) of the scale workload (50–500 resources, 100 per slice); the cost
// is linear in them, so the figures are reported per 1,000 Compositions. The baseline is the
// same list as metadata only, which is what the list would cost if the server could project the
// identities.
func BenchmarkK4SliceList(b *testing.B) {
	n := envInt(b, "ENO_K4_COMPOSITIONS", 100)
	a := newAdmin(b)
	a.skipObjects = true
	ns := a.NewNamespace(b, "k4")
	ctx := kubetest.Context(b, 10*time.Minute)
	slices := 0
	for i := range n {
		syn := synthesis{uuid: uuidFor(i + 1), resources: scaleResources(i), perSlice: scalePerSlice}
		require.NoError(b, a.createSlices(ctx, ns, fmt.Sprintf("comp-%04d", i), "", syn))
		slices += len(syn.sliceNames(""))
	}
	perThousand := 1000 / float64(n)

	b.Run("baseline: metadata only", func(b *testing.B) {
		var read atomic.Int64
		client, err := metadata.NewForConfig(countingBytes(env.AdminConfig(), &read))
		require.NoError(b, err)
		b.ResetTimer()
		for b.Loop() {
			opts := metav1.ListOptions{Limit: 500}
			got := 0
			for {
				list, err := client.Resource(k8s.ResourceSliceGVR).List(ctx, opts)
				require.NoError(b, err)
				got += len(list.Items)
				if opts.Continue = list.Continue; opts.Continue == "" {
					break
				}
			}
			require.GreaterOrEqual(b, got, slices)
		}
		reportPerThousand(b, read.Load(), perThousand)
	})
	b.Run("the fleet index: its initial list, and the heap it keeps", func(b *testing.B) {
		var read atomic.Int64
		cfg := countingBytes(env.AdminConfig(), &read)
		dyn, err := dynamic.NewForConfig(cfg)
		require.NoError(b, err)
		var kept float64
		b.ResetTimer()
		for b.Loop() {
			before := heapInUse()
			fleet, err := k8s.NewFleetIndex(dyn)
			require.NoError(b, err)
			run, stop := context.WithCancel(ctx)
			var running sync.WaitGroup
			running.Go(func() { fleet.Run(run) })
			require.True(b, fleet.WaitForCacheSync(ctx))
			_, err = fleet.ProducedElsewhere(ctx, nil) // the first question starts the slices
			require.NoError(b, err)
			kept += float64(heapInUse() - before)
			stop()
			running.Wait()
		}
		reportPerThousand(b, read.Load(), perThousand)
		b.ReportMetric(kept/float64(b.N)*perThousand/(1<<20), "heapMiB/1000comps")
	})
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// reportPerThousand reports the bytes and seconds of one list scaled to 1,000 Compositions.
func reportPerThousand(b *testing.B, bytes int64, perThousand float64) {
	b.ReportMetric(float64(bytes)/float64(b.N)*perThousand/(1<<20), "MiB/1000comps")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*perThousand, "s/1000comps")
}

// countingBytes returns a copy of cfg whose responses add the bytes read from their bodies
// (after any gzip decoding: what the client decodes) to read.
func countingBytes(cfg *rest.Config, read *atomic.Int64) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = binaryQPS, binaryBurst
	out.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTrip(func(req *http.Request) (*http.Response, error) {
			resp, err := next.RoundTrip(req)
			if err == nil {
				resp.Body = &bodyCounter{ReadCloser: resp.Body, read: read}
			}
			return resp, err
		})
	})
	return out
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type bodyCounter struct {
	io.ReadCloser
	read *atomic.Int64
}

func (c *bodyCounter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.read.Add(int64(n))
	return n, err
}
