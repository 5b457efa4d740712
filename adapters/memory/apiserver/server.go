package apiserver

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Options configures New.
type Options struct {
	// Clock is the simulated time: creationTimestamp, deletionTimestamp and managedFields times.
	// The real server writes them with second resolution, so a clock that moves in whole seconds
	// makes the simulation's times compare as the real ones do. Nil means a clock stopped at
	// 2025-01-01T00:00:00Z.
	Clock func() time.Time

	// Resources are what the server serves; nil means DefaultResources.
	Resources []Resource

	// Seed varies the generated UIDs and names; the same seed gives the same ones.
	Seed uint64

	// Intercept, when set, is asked before each HTTP request is served (direct calls are not
	// intercepted). It runs without the server's lock, so it may call the server.
	Intercept func(Request) Verdict

	// Observe, when set, sees every applied write, including the deletions and updates of
	// CollectGarbage, FinishNamespaceDeletion and FinishCRDDeletion. It runs after the write,
	// without the server's lock.
	Observe func(Event)
}

// Event is one applied write.
type Event struct {
	Actor       string // the manager of the write, or one of the controller actors
	Verb        string // create, update, patch or delete
	Resource    Resource
	Subresource string
	// Before is nil on create; After is nil when the object is gone (a deletion that finished).
	// A DELETE that only marks the object terminating has an After with deletionTimestamp.
	// Both are the stored versions: read only.
	Before, After *unstructured.Unstructured
	Revision      int64
}

// The actors of the controllers the simulation runs as explicit steps.
const (
	GarbageCollector    = "garbage-collector"
	NamespaceController = "namespace-controller"
	CRDFinalizer        = "apiextensions-finalizer"
)

// Server is the in-memory API server. It is safe for concurrent use (client-go's discovery
// client asks for group versions in parallel), but it never starts a goroutine: every request is
// served in the caller's goroutine, so a single-threaded caller gets a deterministic run.
type Server struct {
	mu        sync.Mutex
	opts      Options
	resources []Resource
	rev       int64
	counter   uint64                  // UIDs and generated names
	history   map[objectKey][]version // every version of every object, oldest first
	live      map[objectKey]object    // the latest version of the objects that exist
	byUID     map[string]objectKey    // the UIDs that exist
	pending   []Event                 // events to deliver once the lock is released
	resByKind map[kindKey]Resource    // for ownerReferences and direct writes
	resByName map[string]Resource     // group/resource
}

type objectKey struct {
	resource  string // GroupResource.String()
	namespace string
	name      string
}

type kindKey struct{ apiVersion, kind string }

type version struct {
	rev int64
	obj object // nil: deleted at rev
}

// New builds a server with no objects but the namespaces default and kube-system, as a fresh
// cluster has.
func New(opts Options) *Server {
	if opts.Clock == nil {
		stopped := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		opts.Clock = func() time.Time { return stopped }
	}
	if opts.Resources == nil {
		opts.Resources = DefaultResources()
	}
	s := &Server{
		opts:      opts,
		resources: slices.Clone(opts.Resources),
		history:   map[objectKey][]version{},
		live:      map[objectKey]object{},
		byUID:     map[string]objectKey{},
		resByKind: map[kindKey]Resource{},
		resByName: map[string]Resource{},
	}
	for _, r := range s.resources {
		s.resByKind[kindKey{r.apiVersion(), r.Kind}] = r
		s.resByName[r.groupResource().String()] = r
	}
	if _, ok := s.resByName[Namespaces.groupResource().String()]; ok {
		for _, ns := range []string{"default", "kube-system"} {
			obj := object{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}
			if _, err := s.create(call{manager: "kube-apiserver", res: Namespaces, name: ns}, obj); err != nil {
				panic(fmt.Sprintf("creating namespace %s: %v", ns, err))
			}
		}
		s.pending = nil
	}
	return s
}

// Revision is the current revision: the resourceVersion of the latest write.
func (s *Server) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// lock takes the lock; the returned function releases it and then delivers the events of the
// writes made meanwhile, in order.
func (s *Server) lock() (unlock func()) {
	s.mu.Lock()
	return func() {
		events := s.pending
		s.pending = nil
		s.mu.Unlock()
		if s.opts.Observe != nil {
			for _, e := range events {
				s.opts.Observe(e)
			}
		}
	}
}

func (s *Server) now() time.Time { return s.opts.Clock().UTC().Truncate(time.Second) }

func (s *Server) timestamp() string { return s.now().Format(time.RFC3339) }

// resource finds a served resource by group and plural.
func (s *Server) resource(group, resource string) (Resource, bool) {
	r, ok := s.resByName[schema.GroupResource{Group: group, Resource: resource}.String()]
	return r, ok
}

func keyOf(res Resource, namespace, name string) objectKey {
	if !res.Namespaced {
		namespace = ""
	}
	return objectKey{resource: res.groupResource().String(), namespace: namespace, name: name}
}

// store writes obj (nil deletes) as the next revision and queues its event.
func (s *Server) store(c call, verb string, key objectKey, before, obj object) object {
	s.rev++
	if obj != nil {
		obj = obj.deepCopy()
		obj.meta()["resourceVersion"] = strconv.FormatInt(s.rev, 10)
		s.live[key] = obj
		s.byUID[obj.uid()] = key
	} else {
		delete(s.live, key)
		delete(s.byUID, before.uid())
	}
	s.history[key] = append(s.history[key], version{rev: s.rev, obj: obj})
	actor := c.actor
	if actor == "" {
		actor = c.manager
	}
	s.pending = append(s.pending, Event{
		Actor: actor, Verb: verb, Resource: c.res, Subresource: c.sub,
		Before: before.shared(), After: obj.shared(), Revision: s.rev,
	})
	return obj
}

// nextID returns a fresh pseudo-random 64-bit value derived from the seed and a counter
// (splitmix64), for UIDs and generated names.
func (s *Server) nextID() uint64 {
	s.counter++
	z := s.opts.Seed + s.counter*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (s *Server) newUID() string {
	a, b := s.nextID(), s.nextID()
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>48&0xfff, b&0xffffffffffff)
}

// generatedSuffix is five characters of the alphabet the real server uses for generateName.
func (s *Server) generatedSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	n := s.nextID()
	out := make([]byte, 5)
	for i := range out {
		out[i] = alphabet[n%uint64(len(alphabet))]
		n /= uint64(len(alphabet))
	}
	return string(out)
}

// View is the state of the server as of one revision: what a cache that stopped there holds.
type View struct {
	s   *Server
	rev int64
}

// ViewAt is the server as it was right after revision rev (0: before the first write).
func (s *Server) ViewAt(rev int64) View { return View{s: s, rev: rev} }

// Revision is the revision the view shows.
func (v View) Revision() int64 { return v.rev }

// Get returns the object as of the view's revision, or NotFound.
func (v View) Get(res Resource, namespace, name string) (*unstructured.Unstructured, error) {
	unlock := v.s.lock()
	defer unlock()
	if obj := v.s.at(keyOf(res, namespace, name), v.rev); obj != nil {
		return obj.unstructured(), nil
	}
	return nil, apierrors.NewNotFound(res.groupResource(), name)
}

// Peek is Get without the copy: the stored version itself, which the caller must not change.
func (v View) Peek(res Resource, namespace, name string) (*unstructured.Unstructured, error) {
	unlock := v.s.lock()
	defer unlock()
	if obj := v.s.at(keyOf(res, namespace, name), v.rev); obj != nil {
		return &unstructured.Unstructured{Object: obj}, nil
	}
	return nil, apierrors.NewNotFound(res.groupResource(), name)
}

// List returns the objects of res as of the view's revision (namespace "" for all), filtered by
// opts' label and field selectors, in the order the real server lists them.
func (v View) List(res Resource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	unlock := v.s.lock()
	defer unlock()
	return v.s.list(res, namespace, opts, func(k objectKey) object { return v.s.at(k, v.rev) }, v.rev)
}

// at is the object under key as of rev, or nil.
func (s *Server) at(key objectKey, rev int64) object {
	versions := s.history[key]
	i := sort.Search(len(versions), func(i int) bool { return versions[i].rev > rev })
	if i == 0 {
		return nil
	}
	return versions[i-1].obj
}

// list selects the objects of res in namespace from read (the live state or a view), sorted by
// namespace and name as etcd's keys sort.
func (s *Server) list(res Resource, namespace string, opts metav1.ListOptions, read func(objectKey) object, rev int64) (*unstructured.UnstructuredList, error) {
	sel, err := parseSelectors(res, opts)
	if err != nil {
		return nil, err
	}
	var keys []objectKey
	prefix := res.groupResource().String()
	for k := range s.history {
		if k.resource == prefix && (namespace == "" || k.namespace == namespace) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].namespace != keys[j].namespace {
			return keys[i].namespace < keys[j].namespace
		}
		return keys[i].name < keys[j].name
	})
	out := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": res.apiVersion(), "kind": res.Kind + "List"}}
	out.SetResourceVersion(strconv.FormatInt(rev, 10))
	for _, k := range keys {
		if obj := read(k); obj != nil && sel.matches(res, obj) {
			out.Items = append(out.Items, *obj.unstructured())
		}
	}
	return out, nil
}

// object is a stored object: JSON-compatible values only (int64, float64, string, bool, maps
// and slices), so that deep copies and comparisons are plain.
type object map[string]any

func (o object) deepCopy() object {
	if o == nil {
		return nil
	}
	return runtime.DeepCopyJSON(o)
}

func (o object) unstructured() *unstructured.Unstructured {
	if o == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: o.deepCopy()}
}

// shared is the stored object itself, for readers that never change it. A stored version is
// never written again: every write stores a new copy.
func (o object) shared() *unstructured.Unstructured {
	if o == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: o}
}

// meta is the metadata map, created if absent.
func (o object) meta() map[string]any {
	if o == nil {
		return map[string]any{}
	}
	m, ok := o["metadata"].(map[string]any)
	if !ok {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

func (o object) str(field string) string { s, _ := o.meta()[field].(string); return s }
func (o object) uid() string             { return o.str("uid") }
func (o object) terminating() bool       { return o.meta()["deletionTimestamp"] != nil }

func (o object) finalizers() []string {
	var out []string
	list, _ := o.meta()["finalizers"].([]any)
	for _, f := range list {
		if s, ok := f.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (o object) setFinalizers(f []string) {
	if len(f) == 0 {
		delete(o.meta(), "finalizers")
		return
	}
	list := make([]any, len(f))
	for i, s := range f {
		list[i] = s
	}
	o.meta()["finalizers"] = list
}

type selectors struct {
	labels labels.Selector
	fields fields.Selector
}

// parseSelectors parses opts' selectors, refusing field labels the real server does not index.
func parseSelectors(res Resource, opts metav1.ListOptions) (selectors, error) {
	ls, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return selectors{}, apierrors.NewBadRequest(err.Error())
	}
	fs, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return selectors{}, apierrors.NewBadRequest(err.Error())
	}
	for _, r := range fs.Requirements() {
		switch {
		case slices.Contains(res.fieldLabels(), r.Field):
		case res.is(ConfigMaps): // no conversion of its own: the default one's words
			return selectors{}, apierrors.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %q, %q", r.Field, "metadata.name", "metadata.namespace"))
		default:
			return selectors{}, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", r.Field))
		}
	}
	return selectors{labels: ls, fields: fs}, nil
}

func (sel selectors) matches(res Resource, o object) bool {
	u := &unstructured.Unstructured{Object: o} // read only: no copy
	if !sel.labels.Matches(labels.Set(u.GetLabels())) {
		return false
	}
	set := fields.Set{"metadata.name": u.GetName()}
	if res.Namespaced {
		set["metadata.namespace"] = u.GetNamespace()
	}
	if t, ok := o["type"].(string); ok && res.is(Secrets) {
		set["type"] = t
	}
	if status, ok := o["status"].(map[string]any); ok && res.is(Namespaces) {
		set["status.phase"], _ = status["phase"].(string)
	}
	return sel.fields.Matches(set)
}
