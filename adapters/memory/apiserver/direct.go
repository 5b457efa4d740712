package apiserver

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The methods below give the simulation's models (of Eno, of adversaries) the same semantics
// and the same errors (*apierrors.StatusError) as the HTTP path, without a client. They are not
// intercepted. Create and Update find the resource by the object's apiVersion and kind.

// Get returns the live object, or NotFound.
func (s *Server) Get(res Resource, namespace, name string) (*unstructured.Unstructured, error) {
	unlock := s.lock()
	defer unlock()
	if err := s.serves(res); err != nil {
		return nil, err
	}
	if obj := s.live[keyOf(res, namespace, name)]; obj != nil {
		return obj.unstructured(), nil
	}
	return nil, apierrors.NewNotFound(res.groupResource(), name)
}

// List returns the live objects of res in namespace ("" for all) that opts' label and field
// selectors select.
func (s *Server) List(res Resource, namespace string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	unlock := s.lock()
	defer unlock()
	if err := s.serves(res); err != nil {
		return nil, err
	}
	return s.list(res, namespace, opts, func(k objectKey) object { return s.live[k] }, s.rev)
}

// Names lists the namespace and name of every live object of res, in the order List lists them,
// without copying any object.
func (s *Server) Names(res Resource) []types.NamespacedName {
	unlock := s.lock()
	defer unlock()
	var out []types.NamespacedName
	prefix := res.groupResource().String()
	for k := range s.live {
		if k.resource == prefix {
			out = append(out, types.NamespacedName{Namespace: k.namespace, Name: k.name})
		}
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// Create creates obj as manager.
func (s *Server) Create(manager string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.write(manager, obj, func(c call, o object) (object, error) { return s.create(c, o) })
}

// Update replaces obj as manager (the main resource: status is kept as it is).
func (s *Server) Update(manager string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.write(manager, obj, func(c call, o object) (object, error) { return s.update(c, "update", o) })
}

// UpdateStatus replaces obj's status as manager.
func (s *Server) UpdateStatus(manager string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return s.write(manager, obj, func(c call, o object) (object, error) {
		if !c.res.Status {
			return nil, apierrors.NewNotFound(c.res.groupResource(), c.name)
		}
		c.sub = "status"
		return s.update(c, "update", o)
	})
}

// Patch applies a JSON patch (types.JSONPatchType) or merge patch (types.MergePatchType) as
// manager, to the status subresource if subresource is "status".
func (s *Server) Patch(manager string, res Resource, namespace, name string, pt types.PatchType, data []byte, subresource string) (*unstructured.Unstructured, error) {
	unlock := s.lock()
	defer unlock()
	if err := s.serves(res); err != nil {
		return nil, err
	}
	if subresource != "" && (subresource != "status" || !res.Status) {
		return nil, apierrors.NewNotFound(res.groupResource(), name)
	}
	obj, err := s.patch(call{manager: manager, res: res, sub: subresource, namespace: namespace, name: name}, pt, data)
	return obj.unstructured(), err
}

// Delete deletes as manager. It returns the object if it is still there, terminating with its
// finalizers pending, and nil if it is gone.
func (s *Server) Delete(manager string, res Resource, namespace, name string, opts metav1.DeleteOptions) (*unstructured.Unstructured, error) {
	unlock := s.lock()
	defer unlock()
	if err := s.serves(res); err != nil {
		return nil, err
	}
	obj, err := s.remove(call{manager: manager, res: res, namespace: namespace, name: name}, opts)
	return obj.unstructured(), err
}

func (s *Server) write(manager string, u *unstructured.Unstructured, do func(call, object) (object, error)) (*unstructured.Unstructured, error) {
	unlock := s.lock()
	defer unlock()
	res, ok := s.resByKind[kindKey{u.GetAPIVersion(), u.GetKind()}]
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the simulated server serves no %s of %s", u.GetKind(), u.GetAPIVersion()))
	}
	obj, err := toObject(u.Object)
	if err != nil {
		return nil, err
	}
	out, err := do(call{manager: manager, res: res, namespace: u.GetNamespace(), name: u.GetName()}, obj)
	return out.unstructured(), err
}

func (s *Server) serves(res Resource) error {
	if r, ok := s.resource(res.Group, res.Resource); !ok || r != res {
		return apierrors.NewNotFound(res.groupResource(), "")
	}
	return nil
}

// toObject turns any JSON-marshalable map into a stored object's value types (int64, float64):
// a copy, walked when it holds JSON's types only, else through JSON.
func toObject(v any) (object, error) {
	if c, ok := jsonValue(v); ok {
		if m, ok := c.(map[string]any); ok {
			return m, nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj := object{}
	if err := utiljson.Unmarshal(b, &obj); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return obj, nil
}

// jsonValue copies v as a JSON round trip would decode it (integral numbers as int64), or says
// it holds a type it does not know.
func jsonValue(v any) (any, bool) {
	switch v := v.(type) {
	case nil, string, bool, int64:
		return v, true
	case int:
		return int64(v), true
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
		return v, true
	case map[string]any:
		if v == nil {
			return nil, true
		}
		out := make(map[string]any, len(v))
		for k, x := range v {
			c, ok := jsonValue(x)
			if !ok {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	case []any:
		if v == nil {
			return nil, true
		}
		out := make([]any, len(v))
		for i, x := range v {
			c, ok := jsonValue(x)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	}
	return nil, false
}
