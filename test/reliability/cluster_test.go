package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// cluster is the control plane and the downstream cluster on one in-memory API server, with the
// model of Eno the simulation checks recovery against (enomodel.Env), and the controller's own
// adapters (adapters/k8s) over it. Its helpers are what the scenarios do by hand or read, as
// kubectl would. Every write the controllers send passes a hook first (SetBeforeWrite), named
// as the memory adapter names its writes.
type cluster struct {
	env *enomodel.Env
	// eno serializes Eno's moves: its model is one process.
	eno sync.Mutex
	// syntheses is the clock, in seconds after synthBase: Eno's and the API server's.
	syntheses atomic.Int64
	memory.EventLog

	hookMu sync.Mutex
	hook   func(op, name string) error

	comps      *k8s.Compositions
	slices     *k8s.Slices
	sink       *k8s.TombstoneSink
	store      *k8s.SecretStore
	downstream *k8s.DownstreamObjects
}

func newCluster() *cluster {
	c := &cluster{}
	c.env = enomodel.NewEnv(func() time.Time { return synthBase.Add(time.Duration(c.syntheses.Load()) * time.Second) })
	cfg := c.env.Server.RESTConfig("tombstone-recovery")
	cfg.Transport = hooked{next: cfg.Transport, c: c}
	dyn := must(dynamic.NewForConfig(cfg))
	c.comps, c.slices = must(k8s.NewCompositions(dyn, nil)), must(k8s.NewSlices(dyn))
	c.sink = must(k8s.NewTombstoneSink(dyn))
	c.store = must(k8s.NewSecretStore(must(kubernetes.NewForConfig(cfg)).CoreV1(), nil, inventoryNamespace))
	c.downstream = must(k8s.NewDownstreamObjects(must(metadata.NewForConfig(cfg)), dyn, must(discovery.NewDiscoveryClientForConfig(cfg))))
	return c
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// SetBeforeWrite sets the hook every write of the controllers passes first (nil: none): its
// error fails the write, unapplied, as a killed process's would be. It runs in the writing
// goroutine, so it may act on the cluster.
func (c *cluster) SetBeforeWrite(hook func(op, name string) error) {
	c.hookMu.Lock()
	defer c.hookMu.Unlock()
	c.hook = hook
}

type hooked struct {
	next http.RoundTripper
	c    *cluster
}

func (h hooked) RoundTrip(req *http.Request) (*http.Response, error) {
	h.c.hookMu.Lock()
	hook := h.c.hook
	h.c.hookMu.Unlock()
	if hook != nil && req.Method != http.MethodGet {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			_ = req.Body.Close()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if op, name := writeOp(req, body); op != "" {
			if err := hook(op, name); err != nil {
				return nil, err
			}
		}
	}
	return h.next.RoundTrip(req)
}

// writeOp names a write of the controller's adapters as the memory adapter names its writes,
// and its object as "namespace/name".
func writeOp(req *http.Request, body []byte) (op, name string) {
	seg := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	i := slices.Index(seg, "namespaces")
	if i < 0 || len(seg) < i+3 {
		return "", ""
	}
	var obj struct {
		Metadata struct {
			Name        string         `json:"name"`
			Annotations map[string]any `json:"annotations"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &obj)
	name = seg[i+1] + "/" + obj.Metadata.Name
	if len(seg) > i+3 {
		name = seg[i+1] + "/" + seg[i+3]
	}
	status := len(seg) > i+4 && seg[i+4] == "status"
	switch res, m := seg[i+2], req.Method; {
	case res == "secrets" && m == http.MethodPost:
		return memory.OpCreateChunk, name
	case res == "secrets" && m == http.MethodPut:
		return memory.OpUpdateChunk, name
	case res == "resourceslices" && m == http.MethodPost:
		return memory.OpCreateRecoverySlice, name
	case res == "compositions" && status:
		return memory.OpAppendRecoverySlice, name
	case res == "compositions" && m == http.MethodPatch:
		if _, ok := obj.Metadata.Annotations[domain.AnnotationDecision]; ok {
			return memory.OpWriteDecision, name
		}
		if _, ok := obj.Metadata.Annotations[domain.AnnotationForceResynthesis]; ok {
			return memory.OpRequestResynthesis, name
		}
		if v, ok := obj.Metadata.Annotations[domain.AnnotationArmed]; ok && v == domain.ArmedOff {
			return memory.OpDisarmTombstones, name
		} else if ok {
			return memory.OpArmTombstones, name
		}
	}
	return "", ""
}

func notFound(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", ports.ErrNotFound, err)
	}
	return err
}

// PutComposition creates the Composition, opted in with annotations; Eno has not synthesized it.
func (c *cluster) PutComposition(comp domain.Composition) {
	if err := c.env.CreateComposition(context.Background(), comp.Ref(), comp.Annotations); err != nil {
		panic(err)
	}
}

// DeleteComposition deletes it with the orphan strategy, and lets Eno reconcile the deletion.
func (c *cluster) DeleteComposition(ref domain.CompositionRef) error {
	c.eno.Lock()
	defer c.eno.Unlock()
	return notFound(c.env.DeleteOrphaning(context.Background(), ref))
}

func (c *cluster) LiveComposition(ctx context.Context, ref domain.CompositionRef) (domain.Composition, error) {
	return c.comps.LiveComposition(ctx, ref)
}

// SetAnnotation sets one annotation, as kubectl annotate does.
func (c *cluster) SetAnnotation(ref domain.CompositionRef, key, value string) (domain.Composition, error) {
	if err := c.env.Annotate(context.Background(), ref, key, value); err != nil {
		return domain.Composition{}, err
	}
	return c.LiveComposition(context.Background(), ref)
}

// Compositions lists every Composition.
func (c *cluster) Compositions() []domain.Composition {
	return must(c.comps.ListCompositions(context.Background()))
}

func (c *cluster) GetSlice(ctx context.Context, namespace, name string) (domain.ResourceSlice, error) {
	return c.slices.GetSlice(ctx, namespace, name)
}

// Slices lists every slice of the namespace ("" for all) that is not being deleted.
func (c *cluster) Slices(namespace string) []domain.ResourceSlice {
	var out []domain.ResourceSlice
	for _, n := range c.env.Server.Names(apiserver.ResourceSlices) {
		if namespace != "" && n.Namespace != namespace {
			continue
		}
		if s, err := c.slices.GetSlice(context.Background(), n.Namespace, n.Name); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// SliceOwner is the UID of the slice's controller, "" when none.
func (c *cluster) SliceOwner(namespace, name string) string {
	u, err := c.env.Server.Get(apiserver.ResourceSlices, namespace, name)
	if err != nil {
		return ""
	}
	if o := metav1.GetControllerOf(u); o != nil {
		return string(o.UID)
	}
	return ""
}

// PutSlice replaces the slice's resources, as another client would.
func (c *cluster) PutSlice(s domain.ResourceSlice) {
	u := must(c.env.Server.Get(apiserver.ResourceSlices, s.Namespace, s.Name))
	resources := make([]any, len(s.Resources))
	for i, r := range s.Resources {
		resources[i] = map[string]any{"manifest": r.Manifest, "deleted": r.Deleted}
	}
	_ = unstructured.SetNestedSlice(u.Object, resources, "spec", "resources")
	must(c.env.Server.Update("kubectl", u))
}

// DeleteSlice deletes the slice at once: its finalizers are released first.
func (c *cluster) DeleteSlice(namespace, name string) error {
	if _, err := c.env.Server.Patch("kubectl", apiserver.ResourceSlices, namespace, name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), ""); err != nil {
		return notFound(err)
	}
	_, err := c.env.Server.Delete("kubectl", apiserver.ResourceSlices, namespace, name, metav1.DeleteOptions{})
	return notFound(err)
}

// DownstreamObjects lists every object downstream (the inventory's Secrets aside), in
// canonical order.
func (c *cluster) DownstreamObjects() []domain.ResourceID {
	return slices.DeleteFunc(c.env.Objects(), func(id domain.ResourceID) bool { return id.Namespace == inventoryNamespace })
}

func (c *cluster) ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	return c.store.ListChunks(ctx, lineage)
}

// Secrets lists every Secret of the inventory namespace.
func (c *cluster) Secrets() []domain.ChunkSecret {
	list := must(c.env.Server.List(apiserver.Secrets, inventoryNamespace, metav1.ListOptions{}))
	out := make([]domain.ChunkSecret, len(list.Items))
	for i := range list.Items {
		out[i] = chunkOf(&list.Items[i])
	}
	return out
}

// GetSecret reads one Secret of the inventory namespace.
func (c *cluster) GetSecret(namespace, name string) (domain.ChunkSecret, error) {
	u, err := c.env.Server.Get(apiserver.Secrets, namespace, name)
	if err != nil {
		return domain.ChunkSecret{}, notFound(err)
	}
	return chunkOf(u), nil
}

func chunkOf(u *unstructured.Unstructured) domain.ChunkSecret {
	t, _, _ := unstructured.NestedString(u.Object, "type")
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	s := domain.ChunkSecret{Namespace: u.GetNamespace(), Name: u.GetName(), Type: t, Labels: u.GetLabels(), Annotations: u.GetAnnotations(),
		ResourceVersion: u.GetResourceVersion(), UID: string(u.GetUID()), Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v) // base64, compared as stored
	}
	return s
}

// PutSecret creates a Secret, as another client would.
func (c *cluster) PutSecret(s domain.ChunkSecret) (domain.ChunkSecret, error) {
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Secret", "type": s.Type, "data": s.Data,
		"metadata": map[string]any{"namespace": s.Namespace, "name": s.Name, "labels": s.Labels, "annotations": s.Annotations}})
	if err != nil {
		return domain.ChunkSecret{}, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return domain.ChunkSecret{}, err
	}
	created, err := c.env.Server.Create("kubectl", u)
	if err != nil {
		return domain.ChunkSecret{}, err
	}
	return chunkOf(created), nil
}

func (c *cluster) DeleteSecret(namespace, name string) error {
	_, err := c.env.Server.Delete("kubectl", apiserver.Secrets, namespace, name, metav1.DeleteOptions{})
	return notFound(err)
}
