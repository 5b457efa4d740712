package k8s

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// AddRefHandler calls fn with the Composition an inventory Secret names in its annotations,
// on every add, update and delete the cache sees, so a changed or removed chunk is
// re-recorded promptly. Register before Start.
// A panic in the handler is recovered and given to onPanic (nil drops it).
func (st *SecretStore) AddRefHandler(fn func(domain.CompositionRef), onPanic PanicHandler) error {
	enqueue := func(obj any) {
		defer recoverInto(onPanic)
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		a := m.GetAnnotations()
		ref := domain.CompositionRef{Namespace: a[domain.AnnotationCompositionNamespace], Name: a[domain.AnnotationCompositionName]}
		if ref.Namespace != "" && ref.Name != "" {
			fn(ref)
		}
	}
	_, err := st.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	if err != nil {
		return fmt.Errorf("adding an inventory secret event handler: %w", err)
	}
	return nil
}
