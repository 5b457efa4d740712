package apiserver

import (
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// The controllers below run inside kube-controller-manager (the garbage collector, the namespace
// controller) and kube-apiserver (the CRD finalizer), asynchronously. Here each is one explicit
// sweep, so that the simulation's scheduler decides when it runs; a chain of owners needs as many
// sweeps as it is long. Each returns the objects it sent a DELETE, as they were before.

// controllerManager is the field manager of the controllers' writes, as the user agent of
// kube-controller-manager makes it.
const controllerManager = "kube-controller-manager"

// CollectGarbage is one sweep of the garbage collector over ownerReferences:
//   - an owner terminating with the orphan finalizer loses it once its dependents' references to
//     it are removed;
//   - an owner terminating with foregroundDeletion has its dependents deleted, and loses the
//     finalizer once none with blockOwnerDeletion is left;
//   - a dependent whose owners are all gone (no object of that kind and name with that UID, or a
//     UID that never existed) is deleted in the background with a UID precondition; one that has
//     a live owner too only loses its references to the gone ones. An ownerReference to a kind
//     the server does not serve counts as a live owner (the collector cannot resolve it and
//     deletes nothing).
func (s *Server) CollectGarbage() []*unstructured.Unstructured {
	unlock := s.lock()
	defer unlock()
	var deleted []*unstructured.Unstructured
	for _, key := range s.liveKeys() {
		obj := s.live[key]
		if obj == nil {
			continue
		}
		res := s.resByName[key.resource]
		c := call{manager: controllerManager, actor: GarbageCollector, res: res, namespace: key.namespace, name: key.name}
		fin := obj.finalizers()
		switch {
		case obj.terminating() && slices.Contains(fin, metav1.FinalizerOrphanDependents):
			for _, dep := range s.dependents(obj.uid()) {
				s.dropOwnerRefs(dep, func(ref map[string]any) bool { return ref["uid"] == obj.uid() })
			}
			s.dropFinalizer(c, obj, metav1.FinalizerOrphanDependents)
		case obj.terminating() && slices.Contains(fin, metav1.FinalizerDeleteDependents):
			blocked := false
			for _, dep := range s.dependents(obj.uid()) {
				if d := s.live[dep]; !d.terminating() {
					deleted = append(deleted, s.collect(dep, d, metav1.DeletePropagationForeground))
				}
				if d := s.live[dep]; d != nil && blocks(d, obj.uid()) {
					blocked = true
				}
			}
			if !blocked {
				s.dropFinalizer(c, obj, metav1.FinalizerDeleteDependents)
			}
		case !obj.terminating():
			if d := s.collectDependent(key, obj); d != nil {
				deleted = append(deleted, d)
			}
		}
	}
	return deleted
}

// collectDependent judges one object by its ownerReferences and deletes it, or drops its gone
// owners, as the collector's attemptToDeleteItem does.
func (s *Server) collectDependent(key objectKey, obj object) *unstructured.Unstructured {
	refs, _ := obj.meta()["ownerReferences"].([]any)
	if len(refs) == 0 {
		return nil
	}
	var solid, gone, waiting int
	state := map[string]string{}
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		uid, _ := ref["uid"].(string)
		switch owner := s.owner(key, ref); {
		case owner == nil:
			gone++
			state[uid] = "gone"
		case owner.terminating() && slices.Contains(owner.finalizers(), metav1.FinalizerDeleteDependents):
			waiting++
			state[uid] = "waiting"
		default:
			solid++
		}
	}
	switch {
	case solid > 0 && gone+waiting > 0:
		s.dropOwnerRefs(key, func(ref map[string]any) bool { return state[ref["uid"].(string)] != "" })
		return nil
	case solid > 0:
		return nil
	case waiting > 0:
		return s.collect(key, obj, metav1.DeletePropagationForeground)
	default:
		return s.collect(key, obj, metav1.DeletePropagationBackground)
	}
}

// owner is the live object an ownerReference of the object under key points to, or nil if there
// is none with that UID. An unserved kind is answered with a stand-in (not gone).
func (s *Server) owner(key objectKey, ref map[string]any) object {
	apiVersion, _ := ref["apiVersion"].(string)
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	res, ok := s.resByKind[kindKey{apiVersion, kind}]
	if !ok {
		return object{}
	}
	o := s.live[keyOf(res, key.namespace, name)]
	if o == nil || o.uid() != ref["uid"] {
		return nil
	}
	return o
}

func (s *Server) collect(key objectKey, obj object, policy metav1.DeletionPropagation) *unstructured.Unstructured {
	uid := types.UID(obj.uid())
	c := call{manager: controllerManager, actor: GarbageCollector, res: s.resByName[key.resource], namespace: key.namespace, name: key.name}
	if _, err := s.remove(c, metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return nil
	}
	return obj.unstructured()
}

// dependents are the keys of the live objects with an ownerReference to uid, sorted.
func (s *Server) dependents(uid string) []objectKey {
	var out []objectKey
	for _, k := range s.liveKeys() {
		refs, _ := s.live[k].meta()["ownerReferences"].([]any)
		if slices.ContainsFunc(refs, func(r any) bool { return r.(map[string]any)["uid"] == uid }) {
			out = append(out, k)
		}
	}
	return out
}

func blocks(dep object, uid string) bool {
	refs, _ := dep.meta()["ownerReferences"].([]any)
	return slices.ContainsFunc(refs, func(r any) bool {
		ref := r.(map[string]any)
		return ref["uid"] == uid && ref["blockOwnerDeletion"] == true
	})
}

func (s *Server) dropOwnerRefs(key objectKey, drop func(map[string]any) bool) {
	obj := s.live[key].deepCopy()
	refs, _ := obj.meta()["ownerReferences"].([]any)
	refs = slices.DeleteFunc(refs, func(r any) bool { return drop(r.(map[string]any)) })
	if len(refs) == 0 {
		delete(obj.meta(), "ownerReferences")
	} else {
		obj.meta()["ownerReferences"] = refs
	}
	c := call{manager: controllerManager, actor: GarbageCollector, res: s.resByName[key.resource], namespace: key.namespace, name: key.name}
	_, _ = s.update(c, "patch", obj)
}

func (s *Server) dropFinalizer(c call, obj object, finalizer string) {
	obj = obj.deepCopy()
	obj.setFinalizers(slices.DeleteFunc(obj.finalizers(), func(f string) bool { return f == finalizer }))
	_, _ = s.update(c, "patch", obj)
}

// FinishNamespaceDeletion is one sweep of the namespace controller: each terminating
// namespace's objects are deleted (those with finalizers become terminating), and a namespace
// found empty is finalized and removed.
func (s *Server) FinishNamespaceDeletion() []*unstructured.Unstructured {
	unlock := s.lock()
	defer unlock()
	var deleted []*unstructured.Unstructured
	for _, nsKey := range s.liveKeys() {
		ns := s.live[nsKey]
		if nsKey.resource != Namespaces.groupResource().String() || !ns.terminating() {
			continue
		}
		remaining := 0
		for _, k := range s.liveKeys() {
			if o := s.live[k]; k.namespace == nsKey.name && s.resByName[k.resource].Namespaced {
				if !o.terminating() {
					c := call{manager: controllerManager, actor: NamespaceController, res: s.resByName[k.resource], namespace: k.namespace, name: k.name}
					if _, err := s.remove(c, metav1.DeleteOptions{}); err == nil {
						deleted = append(deleted, o.unstructured())
					}
				}
				if s.live[k] != nil {
					remaining++
				}
			}
		}
		if remaining > 0 {
			continue
		}
		c := call{manager: controllerManager, actor: NamespaceController, res: Namespaces, name: nsKey.name}
		finalized := ns.deepCopy()
		if spec, ok := finalized["spec"].(map[string]any); ok {
			delete(spec, "finalizers")
		}
		s.store(c, "update", nsKey, ns, finalized)
		if gone, err := s.remove(c, metav1.DeleteOptions{}); err == nil && gone == nil {
			deleted = append(deleted, ns.unstructured())
		}
	}
	return deleted
}

// FinishCRDDeletion is one sweep of the apiextensions finalizer: a terminating
// CustomResourceDefinition's objects are deleted, and once none is left the CRD loses its
// cleanup finalizer (and goes, if it has no other).
func (s *Server) FinishCRDDeletion() []*unstructured.Unstructured {
	unlock := s.lock()
	defer unlock()
	var deleted []*unstructured.Unstructured
	for _, crdKey := range s.liveKeys() {
		crd := s.live[crdKey]
		if crdKey.resource != CustomResourceDefinitions.groupResource().String() || !crd.terminating() || !slices.Contains(crd.finalizers(), crdCleanup) {
			continue
		}
		remaining := 0
		for _, k := range s.liveKeys() {
			if res := s.resByName[k.resource]; res.crdName() == crdKey.name {
				if o := s.live[k]; !o.terminating() {
					c := call{manager: "kube-apiserver", actor: CRDFinalizer, res: res, namespace: k.namespace, name: k.name}
					if _, err := s.remove(c, metav1.DeleteOptions{}); err == nil {
						deleted = append(deleted, o.unstructured())
					}
				}
				if s.live[k] != nil {
					remaining++
				}
			}
		}
		if remaining == 0 {
			s.dropFinalizer(call{manager: "kube-apiserver", actor: CRDFinalizer, res: CustomResourceDefinitions, name: crdKey.name}, crd, crdCleanup)
		}
	}
	return deleted
}

// liveKeys are the keys of the live objects in a fixed order.
func (s *Server) liveKeys() []objectKey {
	keys := make([]objectKey, 0, len(s.live))
	for k := range s.live {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.resource != b.resource {
			return a.resource < b.resource
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	return keys
}
