package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// fleetWait bounds the wait for one slice; a variable so that the contract suite waits less for a
// slice that never comes. The first list of every slice may take longer: fleetSyncWait.
var fleetWait = 10 * time.Second

const fleetSyncWait = time.Minute

// fleetIdle is how long the slice informer stays up unused: longer than a pending hand-off's
// recheck interval (1 minute by default), so that its watch keeps following the fleet.
var fleetIdle = 5 * time.Minute

// FleetIndex is ports.FleetIndex over two informers of every namespace: the Compositions, each
// kept as its lineage and whether Eno synthesized it, for as long as Run; and the ResourceSlices,
// each kept as its domain.Production (the transform drops the manifests as each object arrives),
// only while a plan or a hand-off asks: from the first question to fleetIdle without one (design §6.3).
type FleetIndex struct {
	client       dynamic.Interface
	compositions cache.SharedIndexInformer

	mu       sync.Mutex
	run      context.Context // Run's; nil before
	slices   cache.SharedIndexInformer
	stop     context.CancelFunc
	used     time.Time
	waiting  int // callers waiting for the slices' first list: no idle stop meanwhile
	running  sync.WaitGroup
	onThreat func(domain.CompositionRef)
	pinned   func() bool // no idle stop while true: anyArmed
}

// NewFleetIndex builds the Composition informer; Run starts it.
func NewFleetIndex(client dynamic.Interface) (*FleetIndex, error) {
	if client == nil {
		return nil, errors.New("fleet index: a dynamic client is required")
	}
	f := &FleetIndex{client: client, compositions: dynamicinformer.NewFilteredDynamicInformer(client, CompositionGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()}
	f.pinned = f.anyArmed
	return f, f.compositions.SetTransform(keepLineage)
}

// OnThreat calls threatened with the Composition of each recovery slice that a slice added or
// changed threatens (domain.Production.Threatens): its pending hand-off's watch looks again at
// once. An event costs its own identities: the handler holds only the recovery slices.
func (f *FleetIndex) OnThreat(threatened func(domain.CompositionRef)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onThreat = threatened
	if f.slices == nil {
		return nil
	}
	return f.watchThreats(f.slices)
}

func (f *FleetIndex) watchThreats(inf cache.SharedIndexInformer) error {
	threatened := f.onThreat
	var held domain.Threats[domain.CompositionRef] // only this handler's goroutine uses it
	check := func(obj any) {
		if p, ok := obj.(*production); ok {
			held.Set(p.Production, domain.CompositionRef{Namespace: p.Namespace, Name: p.ownerName})
			for _, ref := range held.Of(p.Production) {
				threatened(ref)
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				held.Forget(key)
			}
		},
	})
	return err
}

// Run runs the Composition informer, and the slice informer while it is used, until ctx ends;
// it returns once both have stopped.
func (f *FleetIndex) Run(ctx context.Context) {
	f.mu.Lock()
	f.run = ctx
	f.mu.Unlock()
	f.running.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.slices != nil && f.waiting == 0 && time.Since(f.used) > fleetIdle && !f.pinned() {
				f.stop()
				f.slices = nil
			}
		}, fleetIdle/4)
	})
	f.compositions.RunWithContext(ctx)
	f.mu.Lock() // no slice informer starts once ctx ended; one started before is counted
	f.mu.Unlock()
	f.running.Wait()
}

// anyArmed reports whether any Composition's hand-off is armed: while one is, the slices keep
// being watched, so that a takeover disarms it on the event, whatever the interval (design §6.2).
func (f *FleetIndex) anyArmed() bool {
	for _, obj := range f.compositions.GetStore().List() {
		if l, ok := obj.(*lineage); ok && l.armed {
			return true
		}
	}
	return false
}

// HasSynced reports whether the Composition informer holds a full list.
func (f *FleetIndex) HasSynced() bool { return f.compositions.HasSynced() }

// WaitForCacheSync waits until the Composition informer holds a full list, or ctx ends.
func (f *FleetIndex) WaitForCacheSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), f.compositions.HasSynced)
}

// sliceStore starts the slice informer unless it runs, and returns its store once it holds a full
// list: ErrIndexBehind when it does not within fleetSyncWait, or before Run.
func (f *FleetIndex) sliceStore(ctx context.Context) (cache.Store, error) {
	f.mu.Lock()
	f.used = time.Now()
	f.waiting++
	defer func() {
		f.mu.Lock()
		f.waiting, f.used = f.waiting-1, time.Now()
		f.mu.Unlock()
	}()
	inf := f.slices
	if inf == nil && f.run != nil && f.run.Err() == nil {
		inf = dynamicinformer.NewFilteredDynamicInformer(f.client, ResourceSliceGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
		err := inf.SetTransform(keepProduction)
		if err == nil && f.onThreat != nil {
			err = f.watchThreats(inf)
		}
		if err != nil {
			f.mu.Unlock()
			return nil, err
		}
		var run context.Context
		run, f.stop = context.WithCancel(f.run)
		f.slices = inf
		f.running.Go(func() { inf.RunWithContext(run) })
	}
	f.mu.Unlock()
	if inf == nil {
		return nil, fmt.Errorf("the fleet index is not running: %w", ports.ErrIndexBehind)
	}
	wait, cancel := context.WithTimeout(ctx, fleetSyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the fleet index has not listed every slice within %s: %w", fleetSyncWait, ports.ErrIndexBehind)
	}
	return inf.GetStore(), nil
}

// ProducedElsewhere is domain.ProducedElsewhere over every slice the index holds.
func (f *FleetIndex) ProducedElsewhere(ctx context.Context, ids []domain.ResourceID, excluded ...string) (map[domain.ResourceID]string, error) {
	store, err := f.sliceStore(ctx)
	if err != nil {
		return nil, err
	}
	objs := store.List()
	all := make([]domain.Production, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*production); ok {
			all = append(all, p.Production)
		}
	}
	return domain.ProducedElsewhere(all, ids, excluded...), nil
}

// LineageMembers lists the Compositions the index holds, other than ref, that carry lineage.
func (f *FleetIndex) LineageMembers(_ context.Context, ref domain.CompositionRef, l domain.Lineage) ([]domain.CompositionRef, error) {
	if !f.compositions.HasSynced() {
		return nil, fmt.Errorf("the fleet index has not listed every composition yet: %w", ports.ErrIndexBehind)
	}
	var out []domain.CompositionRef
	for _, o := range f.compositions.GetStore().List() {
		if c, ok := o.(*lineage); ok && c.lineage == l.String() && (c.Namespace != ref.Namespace || c.Name != ref.Name) {
			out = append(out, domain.CompositionRef{Namespace: c.Namespace, Name: c.Name})
		}
	}
	slices.SortFunc(out, domain.CompositionRef.Compare)
	return out, nil
}

// Unsynthesized maps each Composition the index holds that Eno has not synthesized yet to its
// creation time.
func (f *FleetIndex) Unsynthesized(context.Context) (map[domain.CompositionRef]time.Time, error) {
	if !f.compositions.HasSynced() {
		return nil, fmt.Errorf("the fleet index has not listed every composition yet: %w", ports.ErrIndexBehind)
	}
	out := map[domain.CompositionRef]time.Time{}
	for _, o := range f.compositions.GetStore().List() {
		if c, ok := o.(*lineage); ok && c.unsynthesized {
			out[domain.CompositionRef{Namespace: c.Namespace, Name: c.Name}] = c.CreationTimestamp.Time
		}
	}
	return out, nil
}

// WaitForSlice polls the index until it holds the slice as it is live, by UID, at most fleetWait:
// a slice created again under its name is fenced by its own create, never by an earlier one's.
func (f *FleetIndex) WaitForSlice(ctx context.Context, namespace, name string) error {
	store, err := f.sliceStore(ctx)
	if err != nil {
		return err
	}
	live, err := f.client.Resource(ResourceSliceGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading resource slice %s/%s: %w: %w", namespace, name, err, ports.ErrIndexBehind)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, fleetWait, true, func(context.Context) (bool, error) {
		held, ok, err := store.GetByKey(namespace + "/" + name)
		p, _ := held.(*production)
		return ok && p != nil && p.UID == live.GetUID(), err
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("resource slice %s/%s not seen within %s: %w", namespace, name, fleetWait, ports.ErrIndexBehind)
	}
	return err
}

// production is a slice as the index keeps it: its key and what it produces.
type production struct {
	metav1.ObjectMeta
	domain.Production
	ownerName string // the controlling Composition's
}

func (p *production) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (p *production) DeepCopyObject() runtime.Object   { c := *p; return &c }

// keepProduction replaces a slice by its production. One that does not decode produces nothing:
// Eno cannot apply it either.
func keepProduction(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // already transformed, or a tombstone of the store
	}
	p := &production{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}}
	s, err := sliceFromUnstructured(u)
	if err != nil {
		s = domain.ResourceSlice{Namespace: u.GetNamespace(), Name: u.GetName()}
	}
	p.Production = domain.ProductionOf(s)
	if o := metav1.GetControllerOfNoCopy(u); o != nil {
		p.ownerName = o.Name
	}
	return p, nil
}

// lineage is a Composition as the index keeps it: its key, creation time and lineage ("" when
// invalid), and whether Eno has yet to synthesize it (a malformed status counts).
type lineage struct {
	metav1.ObjectMeta
	lineage       string
	armed         bool // a hand-off of it is armed: its watch needs the slices' events (design §6.2)
	unsynthesized bool
}

func (l *lineage) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (l *lineage) DeepCopyObject() runtime.Object   { c := *l; return &c }

// keepLineage replaces a Composition by what the index keeps of it.
func keepLineage(obj any) (any, error) {
	m, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	c, err := compositionFromUnstructured(m)
	if err != nil {
		c = domain.Composition{Namespace: m.GetNamespace(), Name: m.GetName(), Annotations: m.GetAnnotations(), Deleting: m.GetDeletionTimestamp() != nil}
	}
	meta := metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()}
	out := &lineage{ObjectMeta: meta, armed: c.Armed(), unsynthesized: c.Unsynthesized()}
	if l, err := domain.LineageOf(c); err == nil {
		out.lineage = l.String()
	}
	return out, nil
}
