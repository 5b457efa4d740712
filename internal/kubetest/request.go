package kubetest

import (
	"net/http"
	"net/url"
	"strings"
)

// Request is one request to the Kubernetes API as RBAC and the audit log name it. Test packages
// that count or check the requests a controller sends parse them here and name them their way.
type Request struct {
	// Verb is get, list, watch, create, update, patch, delete or deletecollection; for a
	// non-resource request it is the lower-cased HTTP method.
	Verb        string
	Group       string
	Namespace   string
	Resource    string
	Name        string
	Subresource string
	// NonResource: the path names no resource (discovery, /version, /healthz, ...).
	NonResource bool
	// StreamingList: a watch that begins with the current state (sendInitialEvents), which
	// client-go's informers use in place of a LIST.
	StreamingList bool
}

// ParseRequest reads a request's method and URL.
func ParseRequest(method string, u *url.URL) Request {
	var r Request
	var rest []string
	switch parts := strings.Split(strings.Trim(u.Path, "/"), "/"); {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		r.Group, rest = parts[1], parts[3:]
	}
	if len(rest) == 0 {
		return Request{Verb: strings.ToLower(method), NonResource: true}
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		r.Namespace, rest = rest[1], rest[2:]
	}
	r.Resource = rest[0]
	if len(rest) > 1 {
		r.Name = rest[1]
	}
	if len(rest) > 2 {
		r.Subresource = rest[2]
	}
	q := u.Query()
	switch method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			r.Verb = "watch"
			r.StreamingList = q.Get("sendInitialEvents") == "true"
		case r.Name == "":
			r.Verb = "list"
		default:
			r.Verb = "get"
		}
	case http.MethodPost:
		r.Verb = "create"
	case http.MethodPut:
		r.Verb = "update"
	case http.MethodPatch:
		r.Verb = "patch"
	case http.MethodDelete:
		r.Verb = "delete"
		if r.Name == "" {
			r.Verb = "deletecollection"
		}
	default:
		r.Verb = strings.ToLower(method)
	}
	return r
}

// VerbResource names a resource request "verb resource[/subresource]".
func (r Request) VerbResource() string {
	if r.Subresource != "" {
		return r.Verb + " " + r.Resource + "/" + r.Subresource
	}
	return r.Verb + " " + r.Resource
}
