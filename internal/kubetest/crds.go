package kubetest

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// enoCRDs is the single copy of the test CRDs; deploy/crds/README.md points here.
//
//go:embed crds/eno-crds.yaml
var enoCRDs []byte

// establishedGrace is how long after a CRD's Established timestamp the API server stops
// delaying creates (2 s), plus a margin.
const establishedGrace = 2*time.Second + 100*time.Millisecond

var (
	crdResource       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaceResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// CompositionResource and ResourceSliceResource are the Eno resources the environment serves.
var (
	CompositionResource   = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "compositions"}
	ResourceSliceResource = schema.GroupVersionResource{Group: "eno.azure.io", Version: "v1", Resource: "resourceslices"}
)

// parseCRDs decodes the embedded multi-document YAML.
func parseCRDs() ([]*unstructured.Unstructured, error) {
	crds, err := DecodeManifests(enoCRDs)
	if err != nil {
		return nil, fmt.Errorf("decoding crds/eno-crds.yaml: %w", err)
	}
	return crds, nil
}

// parseOptionCRDs decodes Options.CRDs, or the embedded CRDs when it is empty.
func parseOptionCRDs(data []byte) ([]*unstructured.Unstructured, error) {
	if len(data) == 0 {
		return parseCRDs()
	}
	crds, err := DecodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("decoding Options.CRDs: %w", err)
	}
	for _, crd := range crds {
		if crd.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s %q in Options.CRDs is not a CustomResourceDefinition", crd.GetKind(), crd.GetName())
		}
	}
	return crds, nil
}

// DecodeManifests decodes multi-document YAML (or JSON), such as the files of deploy/, skipping
// empty documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := decoder.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
}

// installCRDs creates the Eno CRDs (the embedded ones unless data is set) through the
// apiextensions API and waits until each is Established and Eno's resources answer a list.
func (e *Env) installCRDs(ctx context.Context, data []byte) error {
	crds, err := parseOptionCRDs(data)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	client, err := dynamic.NewForConfig(e.AdminConfig())
	if err != nil {
		return fmt.Errorf("kubetest: creating dynamic client: %w", err)
	}
	for _, crd := range crds {
		if _, err := client.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubetest: creating CRD %s: %w", crd.GetName(), err)
		}
	}
	var lastEstablished time.Time
	for _, crd := range crds {
		name := crd.GetName()
		if err := poll(ctx, func() (bool, error) {
			got, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			since, ok := conditionTrueSince(got, "Established")
			if ok && since.After(lastEstablished) {
				lastEstablished = since
			}
			return ok, nil
		}); err != nil {
			return fmt.Errorf("kubetest: waiting for CRD %s to be Established: %w", name, err)
		}
	}
	// The API server delays every create of a custom resource by 2 s while its CRD has been
	// Established for less than 2 s (by the condition's second-granular timestamp). Waiting that
	// out here keeps the first create in a test from taking 2 s longer than the rest.
	if err := sleepUntil(ctx, lastEstablished.Add(establishedGrace)); err != nil {
		return fmt.Errorf("kubetest: waiting for new CRDs to settle: %w", err)
	}
	// Established means the API server has started serving; a list proves the handler is in place.
	for _, gvr := range []schema.GroupVersionResource{CompositionResource, ResourceSliceResource} {
		if err := poll(ctx, func() (bool, error) {
			_, err := client.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil, err
		}); err != nil {
			return fmt.Errorf("kubetest: waiting for %s to be served: %w", gvr.GroupResource(), err)
		}
	}
	return nil
}

// waitForNamespaces waits until the API server's bootstrap has created the given namespaces.
func (e *Env) waitForNamespaces(ctx context.Context, names ...string) error {
	client, err := dynamic.NewForConfig(e.AdminConfig())
	if err != nil {
		return fmt.Errorf("kubetest: creating dynamic client: %w", err)
	}
	for _, name := range names {
		if err := poll(ctx, func() (bool, error) {
			_, err := client.Resource(namespaceResource).Get(ctx, name, metav1.GetOptions{})
			return err == nil, err
		}); err != nil {
			return fmt.Errorf("kubetest: waiting for namespace %s: %w", name, err)
		}
	}
	return nil
}

// conditionTrueSince reports whether the condition is True and since when (the zero time if
// the timestamp is missing or unreadable).
func conditionTrueSince(obj *unstructured.Unstructured, condition string) (time.Time, bool) {
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != condition || m["status"] != "True" {
			continue
		}
		var since time.Time
		if s, ok := m["lastTransitionTime"].(string); ok {
			since, _ = time.Parse(time.RFC3339, s)
		}
		return since, true
	}
	return time.Time{}, false
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll calls check every 100 ms until it reports done or ctx ends; the last error is reported.
func poll(ctx context.Context, check func() (bool, error)) error {
	for {
		done, err := check()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
