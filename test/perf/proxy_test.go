package perf

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// countingProxy is a plain-HTTP reverse proxy on loopback in front of the API server that
// counts every request passing through it. A real binary pointed at it (through Kubeconfig) has
// its requests counted exactly as rest.Config.Wrap counts an in-process client's.
type countingProxy struct {
	URL     string
	counter *Counter
	srv     *http.Server
	done    chan struct{}
	serving sync.WaitGroup // handlers in flight; a watch ends only when its client goes away
}

func startProxy(t testing.TB, target *rest.Config, counter *Counter) *countingProxy {
	t.Helper()
	upstream, err := url.Parse(target.Host)
	require.NoError(t, err)
	// The proxy authenticates upstream with target's credentials: clientcmd sends none over
	// plain HTTP, which is what the proxy listens on.
	rt, err := rest.TransportFor(target)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{
		// Without the client's Accept-Encoding, the upstream transport asks for gzip itself and
		// hands over the body decoded: counted bytes are what the client decodes, as it would
		// read them uncompressed.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &countingProxy{URL: "http://" + ln.Addr().String(), counter: counter, done: make(chan struct{})}
	p.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.serving.Add(1)
			defer p.serving.Done()
			key := classifyRequest(r)
			sw := &statusWriter{ResponseWriter: w, wrote: func(n int) { counter.addBytes(key, n) }}
			// Deferred: ReverseProxy panics with http.ErrAbortHandler when a client goes away
			// mid-stream, which is how every watch ends.
			defer func() { counter.record(key, sw.status, time.Now()) }()
			rp.ServeHTTP(sw, r)
		}),
	}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("counting proxy: %v", err)
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// Close stops the proxy and its connections, and waits until every request is counted.
func (p *countingProxy) Close() {
	_ = p.srv.Close()
	<-p.done
	p.serving.Wait()
}

// Kubeconfig writes a kubeconfig for the proxy into dir. It holds no credentials: the proxy
// adds its own.
func (p *countingProxy) Kubeconfig(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "proxy.kubeconfig")
	require.NoError(t, kubetest.WriteKubeconfig(path, p.URL, nil, "perf", ""))
	return path
}

// statusWriter remembers the status code and reports each body write's size; Unwrap keeps
// flushing (watches) working.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  func(n int)
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.wrote(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
