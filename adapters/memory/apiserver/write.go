package apiserver

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	stdjson "encoding/json"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// call is one request as the write paths see it, whether it came over HTTP or directly.
type call struct {
	manager   string // the field manager
	actor     string // who writes, for Event; "" means manager
	res       Resource
	sub       string // "" or "status"
	namespace string
	name      string
}

func (c call) key() objectKey { return keyOf(c.res, c.namespace, c.name) }

const (
	namespaceNameLabel = "kubernetes.io/metadata.name"
	namespaceFinalizer = "kubernetes"
	crdCleanup         = "customresourcecleanup.apiextensions.k8s.io"
)

// create is POST: the store's create with the namespace lifecycle admission in front.
func (s *Server) create(c call, obj object) (object, error) {
	obj = omitEmpty(c.res, obj)
	if err := s.checkIdentity(&c, obj, false); err != nil {
		return nil, err
	}
	if c.res.Namespaced {
		ns := s.live[keyOf(Namespaces, "", c.namespace)]
		switch {
		case ns == nil:
			return nil, apierrors.NewNotFound(Namespaces.groupResource(), c.namespace)
		case ns.terminating():
			name := c.name
			if name == "" {
				name = obj.str("generateName")
			}
			err := apierrors.NewForbidden(c.res.groupResource(), name,
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", c.namespace))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
				Type: "NamespaceTerminating", Field: "metadata.namespace", Message: fmt.Sprintf("namespace %s is being terminated", c.namespace)})
			return nil, err
		}
	}
	m := obj.meta()
	for _, f := range []string{"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "generation", "selfLink"} {
		delete(m, f)
	}
	if c.res.is(Namespaces) && c.name != "" {
		setLabel(obj, namespaceNameLabel, c.name) // defaulting, before the field manager sees it
	}
	raw := obj.deepCopy()
	if c.res.Status {
		delete(obj, "status") // a create cannot set status
	}
	s.trackFields(c, nil, raw, obj)
	if c.name == "" {
		for c.name = obj.str("generateName") + s.generatedSuffix(); s.live[c.key()] != nil; {
			c.name = obj.str("generateName") + s.generatedSuffix()
		}
		m["name"] = c.name
	}
	if s.live[c.key()] != nil {
		return nil, apierrors.NewAlreadyExists(c.res.groupResource(), c.name)
	}
	m["uid"] = s.newUID()
	m["creationTimestamp"] = s.timestamp()
	if c.res.keepsGeneration() {
		m["generation"] = int64(1)
	}
	if c.res.is(Namespaces) {
		setLabel(obj, namespaceNameLabel, c.name)
		obj["status"] = map[string]any{"phase": "Active"}
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		if f, _ := spec["finalizers"].([]any); !slices.Contains(f, any(namespaceFinalizer)) {
			spec["finalizers"] = append(f, namespaceFinalizer)
		}
	}
	return s.store(c, "create", c.key(), nil, obj), nil
}

// checkIdentity fills in or checks apiVersion, kind, namespace and name of a request's object
// against the URL. On create, an empty c.name is taken from the object.
func (s *Server) checkIdentity(c *call, obj object, update bool) error {
	if obj == nil {
		return apierrors.NewBadRequest("the request has no object")
	}
	if av, _ := obj["apiVersion"].(string); av == "" {
		obj["apiVersion"] = c.res.apiVersion()
	} else if k, _ := obj["kind"].(string); av != c.res.apiVersion() || (k != "" && k != c.res.Kind) {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", av, c.res.apiVersion()))
	}
	obj["kind"] = c.res.Kind
	m := obj.meta()
	switch ns := obj.str("namespace"); {
	case !c.res.Namespaced:
		delete(m, "namespace")
	case ns == "":
		m["namespace"] = c.namespace
	case ns != c.namespace:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	name := obj.str("name")
	switch {
	case update && name != c.name:
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", name, c.name))
	case !update && c.name == "" && name == "" && obj.str("generateName") == "":
		return apierrors.NewInvalid(c.res.GroupVersionKind().GroupKind(), "", field.ErrorList{
			field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	case !update && c.name == "":
		c.name = name
	}
	return nil
}

// update is PUT, and the second half of PATCH: obj is the whole new object.
func (s *Server) update(c call, verb string, obj object) (object, error) {
	live := s.live[c.key()]
	if live == nil {
		return nil, apierrors.NewNotFound(c.res.groupResource(), c.name)
	}
	obj = omitEmpty(c.res, obj)
	if err := s.checkIdentity(&c, obj, true); err != nil {
		return nil, err
	}
	// A PUT's UID is a storage precondition, checked before the resourceVersion; a patched
	// object's UID is only validated, after it, as immutable metadata.
	if uid := obj.uid(); uid != "" && uid != live.uid() && verb != "patch" {
		return nil, apierrors.NewConflict(c.res.groupResource(), c.name, fmt.Errorf(
			"StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %s, UID in object meta: %s",
			storageKey(c), uid, live.uid()))
	}
	switch rv := obj.str("resourceVersion"); {
	case rv == "" && c.res.unconditionalUpdate():
		obj.meta()["resourceVersion"] = live.str("resourceVersion")
	case rv == "":
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: c.res.Group, Kind: c.res.Resource}, c.name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), 0, "must be specified for an update")})
	case rv != live.str("resourceVersion"):
		return nil, apierrors.NewConflict(c.res.groupResource(), c.name,
			errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid := obj.uid(); uid != "" && uid != live.uid() {
		return nil, apierrors.NewInvalid(c.res.GroupVersionKind().GroupKind(), c.name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
	}
	raw := obj.deepCopy()
	obj = s.prepareForUpdate(c, live, obj)
	s.trackFields(c, live, raw, obj)
	if err := validateUpdate(c, live, obj); err != nil {
		return nil, err
	}
	if reflect.DeepEqual(obj, live) {
		return live, nil // a no-op writes nothing: no new resourceVersion, no managedFields time
	}
	if live.terminating() && len(obj.finalizers()) == 0 {
		s.store(c, verb, c.key(), live, nil)
		return obj, nil // the real server answers with the object of the request
	}
	return s.store(c, verb, c.key(), live, obj), nil
}

// prepareForUpdate is the strategies' PrepareForUpdate and BeforeUpdate: what a write may not
// change is taken from the live object.
func (s *Server) prepareForUpdate(c call, live, obj object) object {
	if c.sub == "status" {
		status, ok := obj["status"]
		obj = live.deepCopy() // the field manager reads managedFields from the live object here
		if ok {
			obj["status"] = status
		} else {
			delete(obj, "status")
		}
	} else if c.res.Status {
		if status, ok := live["status"]; ok {
			obj["status"] = runtimeCopy(status)
		} else {
			delete(obj, "status")
		}
	}
	m, lm := obj.meta(), live.meta()
	m["uid"] = lm["uid"]
	for _, f := range []string{"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"} {
		if v, ok := lm[f]; ok {
			m[f] = v
		} else {
			delete(m, f)
		}
	}
	if c.res.is(Namespaces) {
		setLabel(obj, namespaceNameLabel, c.name)
		if spec, ok := live["spec"].(map[string]any); ok {
			obj["spec"] = runtimeCopy(spec)
		}
	}
	if c.res.keepsGeneration() && !reflect.DeepEqual(withoutMetadata(c.res, obj), withoutMetadata(c.res, live)) {
		m["generation"] = live.meta()["generation"].(int64) + 1
	}
	return obj
}

// withoutMetadata is what a generation counts: everything but metadata, and but status where
// status is a subresource.
func withoutMetadata(res Resource, o object) map[string]any {
	out := map[string]any{}
	for k, v := range o {
		if k != "metadata" && (k != "status" || !res.Status) {
			out[k] = v
		}
	}
	return out
}

// validateUpdate is the part of ValidateObjectMetaUpdate a client can trip over.
func validateUpdate(c call, live, obj object) error {
	gk := c.res.GroupVersionKind().GroupKind()
	if live.terminating() {
		if extra := sets.New(obj.finalizers()...).Difference(sets.New(live.finalizers()...)); extra.Len() > 0 {
			return apierrors.NewInvalid(gk, c.name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "finalizers"),
				fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers %#v", sets.List(extra)))})
		}
	}
	return nil
}

// patch applies a JSON or merge patch to the live object and updates with the result.
func (s *Server) patch(c call, pt types.PatchType, data []byte) (object, error) {
	live := s.live[c.key()]
	if live == nil {
		return nil, apierrors.NewNotFound(c.res.groupResource(), c.name)
	}
	current, err := json.Marshal(live)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		var ops []struct{ Op, Path, From string }
		if err := json.Unmarshal(data, &ops); err != nil {
			var typeErr *stdjson.UnmarshalTypeError
			if errors.As(err, &typeErr) { // worded as the real server's decoding into its own type
				err = fmt.Errorf("json: cannot unmarshal %s into Go value of type []handlers.jsonPatchOp", typeErr.Value)
			}
			return nil, apierrors.NewBadRequest("error decoding patch: " + err.Error())
		}
		p, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if patched, err = p.Apply(current); err != nil {
			return nil, apierrors.NewGenericServerResponse(422, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if patched, err = jsonpatch.MergePatch(current, data); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	default:
		return nil, unsupportedMediaType(c.res, string(pt))
	}
	obj := object{}
	if err := json.Unmarshal(patched, &obj); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return s.update(c, "patch", obj)
}

// unsupportedMediaType refuses a patch type as the real server does for a custom resource. For
// built-in kinds the real server takes strategic merge patches too; the simulation does not.
func unsupportedMediaType(res Resource, contentType string) error {
	msg := "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
	if res.builtin || contentType == string(types.ApplyPatchType) {
		msg = fmt.Sprintf("the simulated API server takes no %s: use %s or %s", contentType, types.JSONPatchType, types.MergePatchType)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 415, Reason: metav1.StatusReasonUnsupportedMediaType, Message: msg}}
}

// remove is DELETE. It returns the object if it is still there (finalizers pending) and nil if
// it is gone.
func (s *Server) remove(c call, opts metav1.DeleteOptions) (object, error) {
	live := s.live[c.key()]
	if live == nil {
		return nil, apierrors.NewNotFound(c.res.groupResource(), c.name)
	}
	if c.res.is(Namespaces) {
		return s.removeNamespace(c, live, opts)
	}
	if p := opts.Preconditions; p != nil {
		conflictOn := schema.GroupResource{Group: c.res.Group, Resource: c.res.Kind}
		if p.UID != nil && string(*p.UID) != live.uid() {
			return nil, apierrors.NewConflict(conflictOn, c.name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, live.uid()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != live.str("resourceVersion") {
			return nil, apierrors.NewConflict(conflictOn, c.name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, live.str("resourceVersion")))
		}
	}
	obj := live.deepCopy()
	obj.setFinalizers(gcFinalizers(obj.finalizers(), opts))
	if c.res.is(CustomResourceDefinitions) && !live.terminating() && !slices.Contains(obj.finalizers(), crdCleanup) {
		obj.setFinalizers(append(obj.finalizers(), crdCleanup))
	}
	if len(obj.finalizers()) == 0 {
		s.store(c, "delete", c.key(), live, nil)
		return nil, nil
	}
	if c.res.is(CustomResourceDefinitions) {
		// apiextensions' own Delete: deletionTimestamp only, no grace period, no generation
		if obj.meta()["deletionTimestamp"] == nil {
			obj.meta()["deletionTimestamp"] = s.timestamp()
		}
	} else {
		s.markDeleting(obj)
	}
	if reflect.DeepEqual(obj, live) {
		return live, nil
	}
	return s.store(c, "delete", c.key(), live, obj), nil
}

// markDeleting sets deletionTimestamp (once) and a zero grace period, and bumps the generation
// the first time, as the store does for an object whose finalizers are pending.
func (s *Server) markDeleting(obj object) {
	m := obj.meta()
	if m["deletionTimestamp"] == nil {
		if g, ok := m["generation"].(int64); ok && g > 0 {
			m["generation"] = g + 1
		}
		m["deletionTimestamp"] = s.timestamp()
	}
	m["deletionGracePeriodSeconds"] = int64(0)
}

// gcFinalizers adds or removes the orphan and foregroundDeletion finalizers as the delete
// options ask; without a policy the object's own choice stays (the default is background).
func gcFinalizers(finalizers []string, opts metav1.DeleteOptions) []string {
	var policy metav1.DeletionPropagation
	switch {
	case opts.OrphanDependents != nil && *opts.OrphanDependents: //nolint:staticcheck // still honoured by the server
		policy = metav1.DeletePropagationOrphan
	case opts.OrphanDependents != nil: //nolint:staticcheck // still honoured by the server
		policy = metav1.DeletePropagationBackground
	case opts.PropagationPolicy != nil:
		policy = *opts.PropagationPolicy
	default:
		return finalizers
	}
	out := slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	switch policy {
	case metav1.DeletePropagationOrphan:
		out = append(out, metav1.FinalizerOrphanDependents)
	case metav1.DeletePropagationForeground:
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	if sets.New(out...).Equal(sets.New(finalizers...)) {
		return finalizers
	}
	return out
}

// removeNamespace is the namespace registry's DELETE: the first one marks the namespace
// Terminating; it goes only once the namespace controller has emptied it (FinishNamespaceDeletion).
func (s *Server) removeNamespace(c call, live object, opts metav1.DeleteOptions) (object, error) {
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && string(*p.UID) != live.uid() {
			return nil, apierrors.NewConflict(Namespaces.groupResource(), c.name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, live.uid()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != live.str("resourceVersion") {
			return nil, apierrors.NewConflict(Namespaces.groupResource(), c.name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, live.str("resourceVersion")))
		}
	}
	if !live.terminating() {
		obj := live.deepCopy()
		obj.meta()["deletionTimestamp"] = s.timestamp()
		obj["status"] = map[string]any{"phase": "Terminating"}
		obj.setFinalizers(gcFinalizers(obj.finalizers(), opts))
		return s.store(c, "delete", c.key(), live, obj), nil
	}
	spec, _ := live["spec"].(map[string]any)
	if f, _ := spec["finalizers"].([]any); len(f) > 0 || len(live.finalizers()) > 0 {
		return live, nil
	}
	s.store(c, "delete", c.key(), live, nil)
	return nil, nil
}

// omitEmpty copies obj without the null and empty metadata fields, and for a built-in kind the
// null and empty top-level fields: the real server decodes into Go types whose fields are
// omitempty, so they are not stored and no manager owns them.
func omitEmpty(res Resource, obj object) object {
	obj = obj.deepCopy()
	empty := func(v any) bool {
		switch v := v.(type) {
		case nil:
			return true
		case map[string]any:
			return len(v) == 0
		case []any:
			return len(v) == 0
		case string:
			return v == ""
		}
		return false
	}
	if m, ok := obj["metadata"].(map[string]any); ok {
		for k, v := range m {
			if empty(v) && k != "managedFields" { // [] asks to reset them
				delete(m, k)
			}
		}
	}
	if res.builtin {
		for k, v := range obj {
			if k != "metadata" && (v == nil || (empty(v) && k != "spec" && k != "status")) {
				delete(obj, k)
			}
		}
	}
	return obj
}

// storageKey is the object's etcd key in kube-apiserver, which some errors quote.
func storageKey(c call) string {
	key := "/registry/"
	if c.res.Group != "" {
		key += c.res.Group + "/"
	}
	key += c.res.Resource + "/"
	if c.res.Namespaced {
		key += c.namespace + "/"
	}
	return key + c.name
}

func setLabel(obj object, key, value string) {
	labels, _ := obj.meta()["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		obj.meta()["labels"] = labels
	}
	labels[key] = value
}

func runtimeCopy(v any) any { return object{"v": v}.deepCopy()["v"] }
