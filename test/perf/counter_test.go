package perf

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// Counts maps "verb resource" (e.g. "get compositions", "create secrets") to a number of requests.
type Counts map[string]int

// Total is the sum of all counts.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Writes counts the mutating requests, events excluded.
func (c Counts) Writes() int {
	n := 0
	for k, v := range c {
		verb, resource, _ := strings.Cut(k, " ")
		if resource != "events" && isWrite(verb) {
			n += v
		}
	}
	return n
}

// Events counts the requests on the events API.
func (c Counts) Events() int {
	n := 0
	for k, v := range c {
		if _, resource, _ := strings.Cut(k, " "); resource == "events" {
			n += v
		}
	}
	return n
}

// Without returns the counts minus the events API.
func (c Counts) Without(resource string) Counts {
	out := Counts{}
	for k, v := range c {
		if _, r, _ := strings.Cut(k, " "); r != resource {
			out[k] = v
		}
	}
	return out
}

// Sub is c - base, keeping only keys that changed.
func (c Counts) Sub(base Counts) Counts {
	out := Counts{}
	for k, v := range c {
		if d := v - base[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range base {
		if _, ok := c[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}

// String lists the counts sorted by key, e.g. "create secrets=3, get compositions=4".
func (c Counts) String() string {
	keys := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, ", ")
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// classify names a request the way the API server's audit log does: a verb (get, list, watch,
// create, update, patch, delete) and a resource (with "/subresource" when there is one).
// Requests outside /api and /apis resources (e.g. /version) keep their path.
func classify(method string, u *url.URL) string {
	r := kubetest.ParseRequest(method, u)
	if r.NonResource {
		return r.Verb + " /" + strings.Trim(u.Path, "/")
	}
	return r.VerbResource()
}

// decisionWrite is the kind of a PATCH of a Composition that writes the recovery decision: the
// runs wait for and time the decisions. A baseline's build may write them as "update compositions".
const decisionWrite = "patch compositions (decision)"

// classifyRequest is classify, with decisionWrite told apart by the request's body: a client's
// copy (GetBody), else the server's, read and put back.
func classifyRequest(r *http.Request) string {
	key := classify(r.Method, r.URL)
	if key != "patch compositions" || r.Body == nil {
		return key
	}
	var body []byte
	var err error
	if r.GetBody != nil {
		var rc io.ReadCloser
		if rc, err = r.GetBody(); err == nil {
			body, err = io.ReadAll(rc)
		}
	} else {
		body, err = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if err == nil && bytes.Contains(body, []byte(strconv.Quote(domain.AnnotationDecision))) {
		return decisionWrite
	}
	return key
}

// Decisions is how many decision writes succeeded, and when the last was answered.
func (c *Counter) Decisions() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, last := 0, time.Time{}
	for _, k := range []string{decisionWrite, "update compositions"} {
		n += c.all[k] - c.failed[k]
		if c.last[k].After(last) {
			last = c.last[k]
		}
	}
	return n, last
}

// Counter counts requests by verb and resource. Safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	all    Counts
	failed Counts // HTTP status >= 400 or no response
	first  map[string]time.Time
	last   map[string]time.Time // of the last successful request of each kind
	bytes  Counts               // response bytes, as the counting proxy writes them
}

func NewCounter() *Counter {
	return &Counter{all: Counts{}, failed: Counts{}, first: map[string]time.Time{}, last: map[string]time.Time{}, bytes: Counts{}}
}

// addBytes counts n more response bytes of kind key (a watch's as its events stream).
func (c *Counter) addBytes(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes[key] += n
}

// Bytes returns the response bytes counted so far by kind; only the counting proxy counts them.
func (c *Counter) Bytes() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.bytes)
}

func (c *Counter) record(key string, status int, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all[key]++
	if _, ok := c.first[key]; !ok {
		c.first[key] = at
	}
	if status == 0 || status >= 400 {
		c.failed[key]++
		return
	}
	c.last[key] = at
}

// Snapshot returns every request counted so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.all)
}

// Failed returns the requests that got an error status or no answer.
func (c *Counter) Failed() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.failed)
}

// Succeeded is how many requests of kind key got a successful answer.
func (c *Counter) Succeeded(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all[key] - c.failed[key]
}

// First is when the first request of kind key was made (zero if none was).
func (c *Counter) First(key string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first[key]
}

// LastSuccess is when the last successful request of kind key was answered (zero if none was).
func (c *Counter) LastSuccess(key string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[key]
}

// Wrap makes every request of cfg's clients count; cfg is changed in place.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, counter: c} })
	return cfg
}

// countingTransport is a counting http.RoundTripper for rest.Config.Wrap.
type countingTransport struct {
	next    http.RoundTripper
	counter *Counter
}

// RoundTrip counts a request once its response body is closed, so that a caller who waits
// for a count also knows the client is done with that request.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := classifyRequest(req)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.counter.record(key, 0, time.Now())
		return resp, err
	}
	resp.Body = &countOnClose{ReadCloser: resp.Body, done: func() { t.counter.record(key, resp.StatusCode, time.Now()) }}
	return resp, nil
}

type countOnClose struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *countOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.done)
	return err
}
