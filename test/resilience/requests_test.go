package resilience_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// call is one API request as RBAC sees it: verb, group, resource, subresource, namespace, name.
type call struct {
	Method        string
	Path          string
	Verb          string
	Group         string
	Resource      string
	Subresource   string
	Namespace     string
	Name          string
	LabelSelector string
	// StreamingList: a watch that begins with the current state (sendInitialEvents), which
	// client-go's informers use in place of a LIST, falling back to one on servers without it.
	StreamingList bool
	Body          []byte // writes only
	Status        int    // 0 when the transport failed
}

// key names a call site loosely: verb and resource (with subresource).
func (c call) key() string {
	r := c.Resource
	if c.Subresource != "" {
		r += "/" + c.Subresource
	}
	if c.Group != "" {
		r += "." + c.Group
	}
	return c.Verb + " " + r
}

// classify parses a request path of the Kubernetes API into a call.
func classify(method string, u *url.URL) call {
	r := kubetest.ParseRequest(method, u)
	c := call{Method: method, Path: u.Path, LabelSelector: u.Query().Get("labelSelector"), Verb: r.Verb,
		Group: r.Group, Resource: r.Resource, Subresource: r.Subresource, Namespace: r.Namespace, Name: r.Name,
		StreamingList: r.StreamingList}
	if r.NonResource {
		c.Group, c.Resource = "", "nonresource:"+u.Path
	}
	return c
}

// readBody returns a write's body and leaves the request able to send it.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return data, nil
}

// recorder keeps every call made through its transport.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c := classify(req.Method, req.URL)
		if req.Method != http.MethodGet && req.Method != http.MethodDelete {
			body, err := readBody(req)
			if err != nil {
				return nil, fmt.Errorf("recording %s %s: %w", req.Method, req.URL.Path, err)
			}
			c.Body = body
		}
		resp, err := next.RoundTrip(req)
		if resp != nil {
			c.Status = resp.StatusCode
		}
		r.mu.Lock()
		r.calls = append(r.calls, c)
		r.mu.Unlock()
		return resp, err
	})
}

func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// bodyMeta decodes the object a write sends: JSON (the dynamic client, for Eno's resources) or
// protobuf (client-go's typed clients, for built-in resources).
func bodyMeta(body []byte) (metav1.Object, error) {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(body, &u.Object); err != nil {
			return nil, err
		}
		return u, nil
	}
	obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), body)
	if err != nil {
		return nil, err
	}
	return meta.Accessor(obj)
}
