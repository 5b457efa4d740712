package fidelity_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
)

// A step is one request of a sequence, or one of the few steps that are not a request. Its
// path, query and body may name:
//   - {ns}: the sequence's namespace;
//   - {uid:x}, {rv:x}: the UID and resourceVersion of the response saved as x (save).
type step struct {
	name        string
	method      string
	path        string
	query       string // without fieldManager: writes get fieldManager=manager
	contentType string
	accept      string
	body        string
	manager     string // the field manager of a write; "" is defaultManager
	save        string

	// pages: a list followed through its continue tokens; the response compared is the
	// concatenation of every page's items.
	pages bool
	// gone: the controllers run until GET path answers 404: on the simulated server its
	// explicit sweeps (CollectGarbage, FinishNamespaceDeletion, FinishCRDDeletion), on the real
	// one what kube-apiserver runs by itself; the response compared is that final GET.
	gone bool
	// served: wait until a list of path answers 200 (a new CRD's resource is served).
	served bool
	// only: compare these fields of the response alone (dotted paths), for an accepted gap in
	// the rest; codeOnly: compare the status code alone.
	only     []string
	codeOnly bool
	// until: the request is repeated (for 30 s at most) until it answers this code, for what
	// kube-apiserver decides from an informer's cache (the namespace lifecycle admission).
	until int
}

const defaultManager = "fidelity"

func get(path string) step { return step{method: http.MethodGet, path: path} }
func list(path, query string) step {
	return step{method: http.MethodGet, path: path, query: query}
}
func create(path, body string) step {
	return step{method: http.MethodPost, path: path, body: body, contentType: "application/json"}
}
func update(path, body string) step {
	return step{method: http.MethodPut, path: path, body: body, contentType: "application/json"}
}
func mergePatch(path, body string) step {
	return step{method: http.MethodPatch, path: path, body: body, contentType: "application/merge-patch+json"}
}
func jsonPatch(path, body string) step {
	return step{method: http.MethodPatch, path: path, body: body, contentType: "application/json-patch+json"}
}
func del(path, body string) step {
	s := step{method: http.MethodDelete, path: path, body: body}
	if body != "" {
		s.contentType = "application/json"
	}
	return s
}

func (s step) as(manager string) step         { s.manager = manager; return s }
func (s step) saving(name string) step        { s.save = name; return s }
func (s step) named(name string) step         { s.name = name; return s }
func (s step) accepting(a string) step        { s.accept = a; return s }
func (s step) allPages() step                 { s.pages = true; return s }
func (s step) withQuery(q string) step        { s.query = q; return s }
func (s step) comparing(paths ...string) step { s.only = paths; return s }
func (s step) statusCodeOnly() step           { s.codeOnly = true; return s }
func (s step) retriedUntil(code int) step     { s.until = code; return s }
func untilGone(path string) step {
	return step{name: "controllers run until " + path + " is gone", method: http.MethodGet, path: path, gone: true}
}
func untilServed(path string) step {
	return step{name: "wait until " + path + " is served", method: http.MethodGet, path: path, served: true}
}
func isWrite(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch
}
func (s step) describe() string {
	if s.name != "" {
		return s.name
	}
	d := s.method + " " + s.path
	if s.query != "" {
		d += "?" + s.query
	}
	if s.body != "" {
		d += " " + s.body
	}
	return d
}

// sequence is a list of steps replayed, in a fresh namespace, against both servers.
type sequence struct {
	name string
	// timed: before every write both clocks move to a later second (managedFields times and
	// timestamps have second resolution), and timestamps are compared by order (each distinct
	// time a symbol, by first appearance); otherwise only by shape.
	timed bool
	steps []step
}

// target is one API server the sequences replay against.
type target interface {
	name() string
	do(req *http.Request) (int, []byte, error)
	tick()
	// sweep runs the controllers once (the simulated server); the real one runs them itself.
	sweep()
}

// simTarget is the simulated API server, with a clock that moves only on tick.
type simTarget struct {
	srv    *apiserver.Server
	client *http.Client
	mu     sync.Mutex
	now    time.Time
}

func newSimTarget(t *testing.T, resources []apiserver.Resource) *simTarget {
	s := &simTarget{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.srv = apiserver.New(apiserver.Options{Resources: resources, Seed: 7, Clock: func() time.Time {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.now
	}})
	var err error
	s.client, err = rest.HTTPClientFor(s.srv.RESTConfig(defaultManager))
	require.NoError(t, err)
	return s
}

func (s *simTarget) name() string { return "sim" }
func (s *simTarget) do(req *http.Request) (int, []byte, error) {
	req.URL.Scheme, req.URL.Host = "http", "sim"
	return send(s.client, req)
}
func (s *simTarget) tick() { s.mu.Lock(); s.now = s.now.Add(time.Second); s.mu.Unlock() }
func (s *simTarget) sweep() {
	s.srv.CollectGarbage()
	s.srv.FinishNamespaceDeletion()
	s.srv.FinishCRDDeletion()
}

// realTarget is kube-apiserver of internal/kubetest.
type realTarget struct {
	client *http.Client
	host   *url.URL
}

func newRealTarget(t *testing.T) *realTarget {
	cfg := env.AdminConfig()
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	host, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	return &realTarget{client: client, host: host}
}

func (r *realTarget) name() string { return "kube-apiserver" }
func (r *realTarget) do(req *http.Request) (int, []byte, error) {
	req.URL.Scheme, req.URL.Host = r.host.Scheme, r.host.Host
	return send(r.client, req)
}

// tick waits for the next whole second (and a margin), so that the next write's time differs
// from every earlier one's.
func (r *realTarget) tick() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now))
}
func (r *realTarget) sweep() { time.Sleep(100 * time.Millisecond) }

func send(c *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// run replays seq against tgt and returns each step's normalised response.
func run(t *testing.T, tgt target, seq sequence, ns string) []string {
	ctx := t.Context()
	vars := map[string]string{"{ns}": ns}
	n := newNormaliser(seq.timed)
	var out []string
	subst := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	request := func(s step, query url.Values) (int, map[string]any) {
		var body io.Reader
		if s.body != "" {
			body = bytes.NewBufferString(subst(s.body))
		}
		req, err := http.NewRequestWithContext(ctx, s.method, "http://placeholder"+subst(s.path), body)
		require.NoError(t, err)
		req.URL.RawQuery = query.Encode()
		req.Header.Set("User-Agent", defaultManager)
		if s.contentType != "" {
			req.Header.Set("Content-Type", s.contentType)
		}
		if s.accept != "" {
			req.Header.Set("Accept", s.accept)
		} else {
			req.Header.Set("Accept", "application/json")
		}
		code, raw, err := tgt.do(req)
		require.NoError(t, err, "%s: %s", tgt.name(), s.describe())
		var obj map[string]any
		if len(raw) > 0 && json.Unmarshal(raw, &obj) != nil {
			obj = map[string]any{"text": string(raw)} // kube-apiserver's 404 of an unserved path
		}
		return code, obj
	}
	for _, s := range seq.steps {
		query, err := url.ParseQuery(subst(s.query))
		require.NoError(t, err)
		if isWrite(s.method) {
			if seq.timed {
				tgt.tick()
			}
			m := s.manager
			if m == "" {
				m = defaultManager
			}
			query.Set("fieldManager", m)
		}
		var code int
		var obj map[string]any
		switch {
		case s.gone:
			deadline := time.Now().Add(30 * time.Second)
			for code, obj = request(s, query); code != http.StatusNotFound && time.Now().Before(deadline); code, obj = request(s, query) {
				tgt.sweep()
			}
		case s.until != 0:
			deadline := time.Now().Add(30 * time.Second)
			for code, obj = request(s, query); code != s.until && time.Now().Before(deadline); code, obj = request(s, query) {
				time.Sleep(50 * time.Millisecond)
			}
		case s.served:
			deadline := time.Now().Add(30 * time.Second)
			for code, obj = request(s, query); code != http.StatusOK && time.Now().Before(deadline); code, obj = request(s, query) {
				time.Sleep(50 * time.Millisecond)
			}
			if code == http.StatusOK { // a new CRD: creates are delayed for 2 s after Established
				time.Sleep(2100 * time.Millisecond)
			}
		case s.pages:
			var items []any
			for {
				code, obj = request(s, query)
				if code != http.StatusOK {
					break
				}
				page, _ := obj["items"].([]any)
				items = append(items, page...)
				meta, _ := obj["metadata"].(map[string]any)
				next, _ := meta["continue"].(string)
				if next == "" {
					break
				}
				query.Set("continue", next)
			}
			if code == http.StatusOK {
				obj = map[string]any{"kind": obj["kind"], "apiVersion": obj["apiVersion"], "items": items}
			}
		default:
			code, obj = request(s, query)
		}
		if s.save != "" && obj != nil {
			meta, _ := obj["metadata"].(map[string]any)
			uid, _ := meta["uid"].(string)
			rv, _ := meta["resourceVersion"].(string)
			vars["{uid:"+s.save+"}"], vars["{rv:"+s.save+"}"] = uid, rv
		}
		switch {
		case s.codeOnly:
			obj = nil
		case len(s.only) > 0 && obj != nil:
			obj = pick(obj, s.only)
		}
		out = append(out, n.normalise(code, obj))
	}
	return out
}

// normaliser turns a response into text to compare: UIDs, resourceVersions and timestamps
// become symbols numbered by first appearance (so the structure of equalities, and the order
// in which they appear, is compared, not the values); a list's own resourceVersion, which
// kube-apiserver takes from etcd's global revision, and continue tokens are compared by shape.
type normaliser struct {
	timed   bool
	symbols map[string]string
	counts  map[string]int
}

func newNormaliser(timed bool) *normaliser {
	return &normaliser{timed: timed, symbols: map[string]string{}, counts: map[string]int{}}
}

func (n *normaliser) symbol(kind, v string) string {
	if v == "" {
		return ""
	}
	key := kind + "\x00" + v
	if s, ok := n.symbols[key]; ok {
		return s
	}
	n.counts[kind]++
	s := fmt.Sprintf("<%s-%d>", kind, n.counts[kind])
	n.symbols[key] = s
	return s
}

var (
	uidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// rvInMessage is a resourceVersion as a precondition's message quotes it.
	rvInMessage = regexp.MustCompile(`\(([0-9]+)\)`)
)

func (n *normaliser) normalise(code int, obj map[string]any) string {
	var walk func(key string, v any, root, listMeta bool) any
	walk = func(key string, v any, root, listMeta bool) any {
		switch v := v.(type) {
		case map[string]any:
			_, hasItems := v["items"]
			ownMeta := root && (hasItems || v["kind"] == "Status")
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := make(map[string]any, len(v))
			for _, k := range keys {
				if k == "continue" && v[k] == "" {
					continue // accepted: kube-apiserver writes an empty continue in a custom resource list
				}
				if k == "causes" {
					v[k] = dedupe(v[k])
				}
				nk := uidPattern.ReplaceAllStringFunc(k, func(u string) string { return n.symbol("uid", u) })
				out[nk] = walk(k, v[k], false, listMeta || (ownMeta && k == "metadata"))
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = walk(key, x, false, false)
			}
			return out
		case string:
			switch key {
			case "uid":
				return n.symbol("uid", v)
			case "resourceVersion":
				if listMeta {
					return "<list-rv>"
				}
				return n.symbol("rv", v)
			case "continue":
				return "<continue>"
			case "creationTimestamp", "deletionTimestamp", "time":
				if _, err := time.Parse(time.RFC3339, v); err != nil {
					return v
				}
				if n.timed {
					return n.symbol("time", v)
				}
				return "<time>"
			case "message":
				v = uidPattern.ReplaceAllStringFunc(v, func(u string) string { return n.symbol("uid", u) })
				return rvInMessage.ReplaceAllStringFunc(v, func(d string) string {
					if s, ok := n.symbols["rv\x00"+strings.Trim(d, "()")]; ok {
						return "(" + s + ")"
					}
					return d
				})
			}
			return v
		}
		return v
	}
	var body any
	if obj != nil {
		body = walk("", obj, true, false)
	}
	b, err := json.MarshalIndent(map[string]any{"code": code, "body": body}, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// runs counts each sequence's replays in this process.
var runs = map[string]int{}

// compare replays seq against both servers and reports every step whose normalised responses
// differ.
func compare(t *testing.T, seq sequence, resources []apiserver.Resource) {
	t.Helper()
	runs[seq.name]++ // -count=n replays in the same kube-apiserver: a namespace per run
	ns := fmt.Sprintf("fid-%s-%d", seq.name, runs[seq.name])
	sim := run(t, newSimTarget(t, resources), seq, ns)
	real := run(t, newRealTarget(t), seq, ns)
	require.Len(t, sim, len(real))
	for i, s := range seq.steps {
		if sim[i] != real[i] {
			t.Errorf("step %d (%s): the responses differ\n--- kube-apiserver\n%s\n--- sim\n%s", i, s.describe(), real[i], sim[i])
		}
	}
}

// dedupe drops repeated causes of an error. Accepted gap "duplicated cause": kube-apiserver
// validates a custom resource's metadata twice on update (the generic store and the custom
// resource strategy), so a Forbidden finalizer appears twice; the simulated server says it once.
func dedupe(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	var out []any
	seen := map[string]bool{}
	for _, c := range list {
		b, _ := json.Marshal(c)
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, c)
		}
	}
	return out
}

// pick keeps the dotted paths of obj.
func pick(obj map[string]any, paths []string) map[string]any {
	out := map[string]any{}
	for _, p := range paths {
		var v any = obj
		for _, k := range strings.Split(p, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		if v == nil {
			continue
		}
		keys := strings.Split(p, ".")
		m := out
		for _, k := range keys[:len(keys)-1] {
			if m[k] == nil {
				m[k] = map[string]any{}
			}
			m = m[k].(map[string]any)
		}
		m[keys[len(keys)-1]] = v
	}
	return out
}
