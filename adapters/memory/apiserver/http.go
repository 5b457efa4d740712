package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Request is what Intercept sees of one HTTP request to a resource. Discovery requests are not
// intercepted.
type Request struct {
	Actor       string // the manager of the RoundTripper that sent it
	Verb        string // get, list, watch, create, update, patch or delete
	Group       string
	Version     string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	ContentType string
	Body        []byte
}

// Verdict is what Intercept decides for a request.
type Verdict struct {
	outcome outcome
	status  int
}

type outcome int

const (
	proceed outcome = iota
	loseRequest
	loseResponse
	respond
)

var (
	// Proceed serves the request.
	Proceed = Verdict{outcome: proceed}
	// LoseRequest fails the request with a transport error (wrapping ErrRequestLost) without
	// applying it, as a crash or timeout before it reached the server would.
	LoseRequest = Verdict{outcome: loseRequest}
	// LoseResponse applies the request and then fails it with a transport error (wrapping
	// ErrResponseLost): the write happened, the client does not know.
	LoseResponse = Verdict{outcome: loseResponse}
)

// Respond answers the request with the HTTP status code (e.g. 503) and a metav1.Status body of
// the matching reason, without applying it.
func Respond(status int) Verdict { return Verdict{outcome: respond, status: status} }

var (
	ErrRequestLost  = errors.New("simulated failure: the request did not reach the server")
	ErrResponseLost = errors.New("simulated failure: the server applied the request, its response was lost")
)

// RESTConfig is a config for client-go's clients (dynamic, metadata, typed, discovery) on the
// server, sending as manager: its user agent, and the field manager of requests without a
// fieldManager parameter. The server speaks JSON only, so typed clients are told to send JSON
// (client-go v0.35 would send protobuf). Client-side rate limiting is off, so nothing waits on
// the wall clock.
func (s *Server) RESTConfig(manager string) *rest.Config {
	return &rest.Config{
		Host:          "http://sim",
		ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		Transport:     s.RoundTripper(manager),
		UserAgent:     manager,
		RateLimiter:   flowcontrol.NewFakeAlwaysRateLimiter(),
	}
}

// RoundTripper serves HTTP requests in the calling goroutine, as manager.
func (s *Server) RoundTripper(manager string) http.RoundTripper {
	return roundTripper{s: s, manager: manager}
}

type roundTripper struct {
	s       *Server
	manager string
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	segments := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if doc, ok := t.s.discovery(segments); ok {
		return reply(req, http.StatusOK, doc), nil
	}
	r, err := t.s.route(req, segments)
	if err != nil {
		return replyError(req, err), nil
	}
	r.Actor, r.Body, r.ContentType = t.manager, body, req.Header.Get("Content-Type")
	verdict := Proceed
	if t.s.opts.Intercept != nil {
		verdict = t.s.opts.Intercept(r)
	}
	switch verdict.outcome {
	case loseRequest:
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrRequestLost)
	case respond:
		return replyError(req, apierrors.NewGenericServerResponse(verdict.status, req.Method,
			schema.GroupResource{Group: r.Group, Resource: r.Resource}, r.Name, "injected by the simulation", 0, false)), nil
	}
	manager := t.manager
	if fm := req.URL.Query().Get("fieldManager"); fm != "" {
		manager = fm
	}
	code, out := t.s.serve(r, manager, req.URL.Query())
	if verdict.outcome == loseResponse {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrResponseLost)
	}
	if code >= 300 {
		return replyError(req, out.(error)), nil
	}
	if as := partialMetadataAccepted(req.Header.Get("Accept")); as != "" {
		out = asPartialObjectMetadata(out)
	}
	return reply(req, code, out), nil
}

// route parses a resource URL: /api/v1/... or /apis/<group>/<version>/..., then
// [namespaces/<ns>/]<resource>[/<name>[/<subresource>]].
func (s *Server) route(req *http.Request, seg []string) (Request, error) {
	notFound := apierrors.NewGenericServerResponse(http.StatusNotFound, req.Method, schema.GroupResource{}, "", "", 0, false)
	var r Request
	switch {
	case len(seg) >= 3 && seg[0] == "api" && seg[1] == "v1":
		r.Version, seg = "v1", seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		r.Group, r.Version, seg = seg[1], seg[2], seg[3:]
	default:
		return r, notFound
	}
	if len(seg) >= 3 && seg[0] == "namespaces" {
		if res, ok := s.resource(r.Group, seg[2]); ok && res.Namespaced {
			r.Namespace, seg = seg[1], seg[2:]
		}
	}
	res, ok := s.resource(r.Group, seg[0])
	if !ok || res.Version != r.Version || len(seg) > 3 || (r.Namespace != "" && !res.Namespaced) {
		return r, notFound
	}
	r.Resource = res.Resource
	if len(seg) > 1 {
		r.Name = seg[1]
	}
	if len(seg) > 2 {
		r.Subresource = seg[2]
		if r.Subresource != "status" || !res.Status {
			return r, notFound
		}
	}
	q := req.URL.Query()
	switch {
	case req.Method == http.MethodGet && (q.Get("watch") == "true" || q.Get("watch") == "1"):
		r.Verb = "watch"
	case req.Method == http.MethodGet && r.Name == "":
		r.Verb = "list"
	case req.Method == http.MethodGet:
		r.Verb = "get"
	case req.Method == http.MethodPost && r.Name == "" && (r.Namespace != "" || !res.Namespaced):
		r.Verb = "create"
	case req.Method == http.MethodPut && r.Name != "":
		r.Verb = "update"
	case req.Method == http.MethodPatch && r.Name != "":
		r.Verb = "patch"
	case req.Method == http.MethodDelete && r.Name != "":
		r.Verb = "delete"
	default:
		return r, apierrors.NewMethodNotSupported(res.groupResource(), strings.ToLower(req.Method))
	}
	return r, nil
}

// serve runs one routed request; out is the response object, or the error for a code >= 300.
func (s *Server) serve(r Request, manager string, q url.Values) (code int, out any) {
	unlock := s.lock()
	defer unlock()
	res, _ := s.resource(r.Group, r.Resource)
	c := call{manager: manager, res: res, sub: r.Subresource, namespace: r.Namespace, name: r.Name}
	var obj object
	var err error
	code = http.StatusOK
	switch r.Verb {
	case "get":
		if obj = s.live[c.key()]; obj == nil {
			err = apierrors.NewNotFound(res.groupResource(), r.Name)
		}
	case "list":
		list, err := s.list(res, r.Namespace, metav1.ListOptions{LabelSelector: q.Get("labelSelector"), FieldSelector: q.Get("fieldSelector")},
			func(k objectKey) object { return s.live[k] }, s.rev)
		if err != nil {
			return errorCode(err), err
		}
		if res.builtin { // kube-apiserver's typed lists carry no apiVersion and kind per item
			for i := range list.Items {
				delete(list.Items[i].Object, "apiVersion")
				delete(list.Items[i].Object, "kind")
			}
		}
		return code, list
	case "watch":
		err = apierrors.NewMethodNotSupported(res.groupResource(), "watch")
	case "create":
		if obj, err = decodeObject(r); err == nil {
			obj, err = s.create(c, obj)
			code = http.StatusCreated
		}
	case "update":
		if obj, err = decodeObject(r); err == nil {
			obj, err = s.update(c, "update", obj)
		}
	case "patch":
		mediaType, _, _ := mime.ParseMediaType(r.ContentType)
		obj, err = s.patch(c, types.PatchType(mediaType), r.Body)
	case "delete":
		var opts metav1.DeleteOptions
		if len(bytes.TrimSpace(r.Body)) > 0 {
			if err := json.Unmarshal(r.Body, &opts); err != nil {
				return http.StatusBadRequest, apierrors.NewBadRequest(err.Error())
			}
		}
		if p := q.Get("propagationPolicy"); p != "" {
			policy := metav1.DeletionPropagation(p)
			opts.PropagationPolicy = &policy
		}
		before := s.live[c.key()]
		if obj, err = s.remove(c, opts); err == nil && obj == nil {
			return code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
				Details: &metav1.StatusDetails{Name: r.Name, Group: r.Group, Kind: r.Resource, UID: types.UID(before.uid())}}
		}
	}
	if err != nil {
		return errorCode(err), err
	}
	return code, obj.deepCopy()
}

func decodeObject(r Request) (object, error) {
	if mediaType, _, _ := mime.ParseMediaType(r.ContentType); mediaType != "" && mediaType != "application/json" {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 415,
			Reason: metav1.StatusReasonUnsupportedMediaType, Message: "the simulated API server reads JSON only, not " + mediaType}}
	}
	return toObject(json.RawMessage(r.Body))
}

// discovery answers the legacy discovery documents. A client asking for aggregated discovery
// gets a plain application/json document and falls back to the legacy protocol.
func (s *Server) discovery(seg []string) (any, bool) {
	switch {
	case len(seg) == 1 && seg[0] == "api":
		return &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "sim"}}}, true
	case len(seg) == 1 && seg[0] == "apis":
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, r := range s.resources {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: r.apiVersion(), Version: r.Version}
			i := slices.IndexFunc(list.Groups, func(g metav1.APIGroup) bool { return g.Name == r.Group })
			switch {
			case r.Group == "":
			case i < 0:
				list.Groups = append(list.Groups, metav1.APIGroup{Name: r.Group, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
			case !slices.Contains(list.Groups[i].Versions, gv):
				list.Groups[i].Versions = append(list.Groups[i].Versions, gv)
			}
		}
		return list, true
	case len(seg) == 2 && seg[0] == "api" && seg[1] == "v1":
		return s.resourceList("", "v1"), true
	case len(seg) == 3 && seg[0] == "apis":
		if list := s.resourceList(seg[1], seg[2]); len(list.APIResources) > 0 {
			return list, true
		}
	}
	return nil, false
}

func (s *Server) resourceList(group, version string) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: metav1.GroupVersion{Group: group, Version: version}.String()}
	for _, r := range s.resources {
		if r.Group != group || r.Version != version {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.Resource, SingularName: singular(r.Kind),
			Namespaced: r.Namespaced, Kind: r.Kind, Verbs: verbs})
		if r.Status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.Resource + "/status",
				Namespaced: r.Namespaced, Kind: r.Kind, Verbs: []string{"get", "patch", "update"}})
		}
	}
	return list
}

// partialMetadataAccepted is the "as" parameter of the first JSON media type in accept that asks
// for meta.k8s.io/v1 PartialObjectMetadata(List), as the metadata client does; "" otherwise.
func partialMetadataAccepted(accept string) string {
	for _, part := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && mediaType == "application/json" && params["g"] == "meta.k8s.io" && params["v"] == "v1" &&
			strings.HasPrefix(params["as"], "PartialObjectMetadata") {
			return params["as"]
		}
	}
	return ""
}

// asPartialObjectMetadata keeps only the metadata of a response object or of each list item.
func asPartialObjectMetadata(out any) any {
	switch v := out.(type) {
	case object:
		return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": v["metadata"]}
	case interface{ UnstructuredContent() map[string]any }:
		list, ok := v.UnstructuredContent()["items"].([]any)
		if !ok {
			return out
		}
		items := make([]any, len(list))
		for i, item := range list {
			items[i] = map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": item.(map[string]any)["metadata"]}
		}
		return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
			"metadata": v.UnstructuredContent()["metadata"], "items": items}
	}
	return out
}

func errorCode(err error) int {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return http.StatusInternalServerError
}

func replyError(req *http.Request, err error) *http.Response {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	body := status.Status()
	body.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return reply(req, int(body.Code), &body)
}

func reply(req *http.Request, code int, out any) *http.Response {
	b, err := json.Marshal(out)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"message":%q}`, err))
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req,
	}
}
