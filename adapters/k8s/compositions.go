package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Compositions reads Eno Compositions and writes recovery decisions on them.
type Compositions struct {
	client dynamic.Interface
	lister cache.GenericLister
}

// NewCompositions reads through lister when it is not nil (a lister of the Composition
// informer's indexer), else live. LiveComposition and WriteDecision always go to the
// API server.
func NewCompositions(client dynamic.Interface, lister cache.GenericLister) (*Compositions, error) {
	if client == nil {
		return nil, errors.New("compositions: a dynamic client is required")
	}
	return &Compositions{client: client, lister: lister}, nil
}

// GetComposition reads from the cache when there is one. The result may be stale; writers
// recheck with LiveComposition.
func (c *Compositions) GetComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error) {
	if c.lister == nil {
		return c.LiveComposition(ctx, ref)
	}
	obj, err := c.lister.ByNamespace(ref.Namespace).Get(ref.Name)
	if err != nil {
		return domain.Composition{}, apiError(fmt.Sprintf("reading composition %s from the cache", ref), err)
	}
	r, err := asRead(obj)
	if err != nil {
		return domain.Composition{}, fmt.Errorf("reading composition %s from the cache: %w", ref, err)
	}
	if r.err != nil {
		return domain.Composition{}, r.err
	}
	return r.composition(), nil
}

// ListCompositions lists the Compositions in the cache, or live when there is none. One whose
// status cannot be read is listed with its metadata only (read): the caller looks for those that
// share a lineage, which the annotations decide.
func (c *Compositions) ListCompositions(ctx context.Context) ([]domain.Composition, error) {
	var objs []runtime.Object
	if c.lister != nil {
		var err error
		if objs, err = c.lister.List(labels.Everything()); err != nil {
			return nil, fmt.Errorf("listing compositions from the cache: %w", err)
		}
	} else {
		list, err := c.client.Resource(CompositionGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, apiError("listing compositions", err)
		}
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
	}
	out := make([]domain.Composition, 0, len(objs))
	for _, obj := range objs {
		r, err := asRead(obj)
		if err != nil {
			return nil, fmt.Errorf("listing compositions from the cache: %w", err)
		}
		out = append(out, r.composition())
	}
	return out, nil
}

// LiveComposition reads the Composition from the API server, never from a cache.
func (c *Compositions) LiveComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error) {
	u, err := c.get(ctx, ref)
	if err != nil {
		return domain.Composition{}, err
	}
	return compositionFromUnstructured(u)
}

func (c *Compositions) get(ctx context.Context, ref domain.CompositionRef) (*unstructured.Unstructured, error) {
	u, err := c.client.Resource(CompositionGVR).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, apiError(fmt.Sprintf("reading composition %s", ref), err)
	}
	return u, nil
}

// WriteDecision sets the decision annotation if the Composition still has comp's resourceVersion
// and UID (annotate), as the API server itself checks.
func (c *Compositions) WriteDecision(ctx context.Context, comp domain.Composition, d domain.Decision) error {
	ref := comp.Ref()
	if comp.ResourceVersion == "" {
		return fmt.Errorf("writing the recovery decision on composition %s: %w: no resourceVersion to use as precondition; read the composition and retry", ref, ports.ErrConflict)
	}
	if _, err := annotate(ctx, c.client, comp, domain.AnnotationDecision, d.Encode(), "writing the recovery decision on composition "+ref.String()); err != nil {
		return err
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("wrote recovery decision", "composition", ref.String(),
		"synthesisUUID", d.SynthesisUUID, "outcome", d.Outcome.String())
	return nil
}

// WriteReview sets the review annotation (domain.ReviewValue) on comp (annotate: ports.ErrConflict
// when it changed since it was read). Only approve and reject write it, with an operator's credentials.
func (c *Compositions) WriteReview(ctx context.Context, comp domain.Composition, value string) error {
	_, err := annotate(ctx, c.client, comp, domain.AnnotationReview, value, fmt.Sprintf("writing %s on composition %s", domain.AnnotationReview, comp.Ref()))
	return err
}

// annotate sets one annotation on comp with a merge patch carrying comp's UID and
// resourceVersion, so the API server refuses it if the Composition changed since it was read:
// ports.ErrConflict, or Invalid for another UID at the same resourceVersion (never issued twice).
func annotate(ctx context.Context, client dynamic.Interface, comp domain.Composition, key, value, what string) (*unstructured.Unstructured, error) {
	if comp.ResourceVersion == "" {
		return nil, fmt.Errorf("%s: a resourceVersion is required", what)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{ // strings only: cannot fail
		"resourceVersion": comp.ResourceVersion,
		"uid":             comp.UID,
		"annotations":     map[string]any{key: value},
	}})
	u, err := client.Resource(CompositionGVR).Namespace(comp.Namespace).Patch(ctx, comp.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, apiError(what, err)
	}
	return u, nil
}

// asRead is a cached Composition as read: the standalone cache's own (CompositionAsRead), else
// read here from an unstructured one or a host's (eno-reconciler's) typed one, converted without
// importing Eno.
func asRead(obj runtime.Object) (*readComposition, error) {
	if r, ok := obj.(*readComposition); ok {
		return r, nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("converting a cached %T: %w", obj, err)
		}
		u = &unstructured.Unstructured{Object: m}
	}
	return read(u), nil
}

// DropManagedFields is a cache transform that removes metadata.managedFields, which nothing reads
// from a cache. A write that starts from a cached object sends none, which the API server takes
// as "keep the stored ones".
func DropManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}
