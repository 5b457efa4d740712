package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/go-logr/logr"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// SecretStore keeps inventory chunk Secrets in one namespace of the downstream cluster.
// It creates and updates, never deletes, and refuses Secrets outside its namespace or
// without our managed-by label.
type SecretStore struct {
	// rest writes Secrets and reads back their metadata only (writeChunk).
	rest      rest.Interface
	secrets   corev1client.SecretInterface
	namespace string
	cached    CachedSecrets // nil: every read is live
}

// CachedSecrets is a cache of our inventory Secrets' metadata in the inventory namespace: of
// our type and label only, without data. runnable keeps one in controller-runtime's cache.
type CachedSecrets interface {
	// Synced is true once the cache holds the initial list.
	Synced() bool
	// ListLineage lists the cached Secrets with that lineage label. Don't mutate them.
	ListLineage(lineage string) ([]*metav1.PartialObjectMetadata, error)
	// Get is the cached Secret of that name, false when the cache holds none. Don't mutate it.
	Get(name string) (*metav1.PartialObjectMetadata, bool)
}

// NewSecretStore binds the store to namespace (the inventory namespace, usually
// domain.DefaultInventoryNamespace). Secrets are read and written live through core; cached,
// when not nil, serves ListCachedChunks once it has synced.
func NewSecretStore(core corev1client.CoreV1Interface, cached CachedSecrets, namespace string) (*SecretStore, error) {
	if core == nil {
		return nil, errors.New("secret store: a core client is required")
	}
	if namespace == "" {
		return nil, errors.New("secret store: the inventory namespace is required")
	}
	return &SecretStore{rest: core.RESTClient(), secrets: core.Secrets(namespace), namespace: namespace, cached: cached}, nil
}

// LineageOf is what a cache of inventory Secrets indexes them by: the lineage label.
func LineageOf(m metav1.Object) []string {
	if l, ok := m.GetLabels()[domain.LabelLineage]; ok {
		return []string{l}
	}
	return nil
}

// synced is true once the cache holds the initial list.
func (st *SecretStore) synced() bool { return st.cached != nil && st.cached.Synced() }

// ListChunks lists every Secret of the inventory namespace with the lineage label, ours or not,
// live from the API server: reading must see foreign Secrets to refuse them.
func (st *SecretStore) ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	return listLineage(ctx, st.secrets, st.namespace, lineage, labels.Set{}, 0)
}

// listLineage lists the lineage's Secrets in namespace that also carry the labels more, in pages
// of limit Secrets (0: one page).
func listLineage(ctx context.Context, secrets corev1client.SecretInterface, namespace string, lineage domain.Lineage, more labels.Set, limit int64) ([]domain.ChunkSecret, error) {
	selector := labels.Merge(more, labels.Set{domain.LabelLineage: lineage.String()}).AsSelector().String() // more stays the caller's
	return listChunks(ctx, secrets, fmt.Sprintf("listing inventory secrets of lineage %s in namespace %s", lineage, namespace), selector, limit)
}

// listChunks lists the Secrets selector selects, in pages of limit Secrets (0: one page).
func listChunks(ctx context.Context, secrets corev1client.SecretInterface, what, selector string, limit int64) ([]domain.ChunkSecret, error) {
	out := []domain.ChunkSecret{}
	opts := metav1.ListOptions{LabelSelector: selector, Limit: limit}
	for {
		list, err := secrets.List(ctx, opts)
		if err != nil {
			return nil, apiError(what, err)
		}
		for i := range list.Items {
			out = append(out, chunkFromSecret(&list.Items[i]))
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// ListCachedChunks lists our Secrets of the lineage from the cache. Until the cache has synced
// (or when there is none) it lists live instead: never staler than the cache would be.
func (st *SecretStore) ListCachedChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	if !st.synced() {
		return listLineage(ctx, st.secrets, st.namespace, lineage, labels.Set{domain.LabelManagedBy: domain.ManagedByValue}, 0)
	}
	objs, err := st.cached.ListLineage(lineage.String())
	if err != nil {
		return nil, fmt.Errorf("listing cached inventory secrets of lineage %s: %w", lineage, err)
	}
	out := make([]domain.ChunkSecret, 0, len(objs))
	for _, m := range objs {
		// A copy (the cache is never handed out) without data, of our type: the cache lists no other.
		out = append(out, chunkFromSecret(&corev1.Secret{ObjectMeta: m.ObjectMeta, Type: domain.SecretType}))
	}
	return out, nil
}

// GetChunk reads the Secret of that name in the inventory namespace live, ours or not; never
// a Secret of another namespace.
func (st *SecretStore) GetChunk(ctx context.Context, name string) (domain.ChunkSecret, error) {
	s, err := st.secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return domain.ChunkSecret{}, apiError(fmt.Sprintf("reading inventory secret %s/%s", st.namespace, name), err)
	}
	return chunkFromSecret(s), nil
}

// CreateChunk creates the Secret; ports.ErrAlreadyExists when the name is taken.
func (st *SecretStore) CreateChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
	if err := st.admit("creating", s); err != nil {
		return domain.ChunkSecret{}, err
	}
	// A resourceVersion on s is passed on: the API server rejects it, as it should a create
	// prepared from a Secret the caller believed existed. The field manager is named, whatever
	// the user agent: the history's write time is read from its entries only (design §6.3).
	created, err := st.writeChunk(ctx, secretFromChunk(withoutData(s)), s.Data, false, domain.FieldManager)
	if err != nil {
		return domain.ChunkSecret{}, apiError(fmt.Sprintf("creating inventory secret %s/%s", st.namespace, s.Name), err)
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("created inventory secret", "secret", s.Name, "lineage", s.Labels[domain.LabelLineage])
	return created, nil
}

// UpdateChunk replaces the Secret's type, labels, annotations and data if its resourceVersion
// is still s.ResourceVersion (ports.ErrConflict otherwise; the API server enforces it too).
// Other metadata (owner references, finalizers) is kept.
func (st *SecretStore) UpdateChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
	return st.update(ctx, s, domain.FieldManager)
}

// MarkChunk is UpdateChunk under domain.MarkFieldManager: a write of annotations only, which
// leaves the time of our data writes where it is (design §4, disabled later).
func (st *SecretStore) MarkChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
	return st.update(ctx, s, domain.MarkFieldManager)
}

func (st *SecretStore) update(ctx context.Context, s domain.ChunkSecret, manager string) (domain.ChunkSecret, error) {
	if err := st.admit("updating", s); err != nil {
		return domain.ChunkSecret{}, err
	}
	what := fmt.Sprintf("updating inventory secret %s/%s", st.namespace, s.Name)
	if s.ResourceVersion == "" {
		return domain.ChunkSecret{}, fmt.Errorf("%s: %w: no resourceVersion to use as precondition; read the secret and retry", what, ports.ErrConflict)
	}
	live, err := st.atVersion(ctx, s.Name, s.ResourceVersion)
	if err != nil {
		return domain.ChunkSecret{}, apiError(what, err)
	}
	if live.ResourceVersion != s.ResourceVersion {
		return domain.ChunkSecret{}, fmt.Errorf("%s: resourceVersion is %s, the update was prepared from %s: %w",
			what, live.ResourceVersion, s.ResourceVersion, ports.ErrConflict)
	}
	if !(domain.ChunkSecret{Labels: live.Labels, Type: string(live.Type)}).Owned() {
		return domain.ChunkSecret{}, fmt.Errorf("%s: the stored secret lacks label %s=%s or type %s; it is not ours, refusing to touch it",
			what, domain.LabelManagedBy, domain.ManagedByValue, domain.SecretType)
	}
	applyChunk(live, withoutData(s))
	updated, err := st.writeChunk(ctx, live, s.Data, true, manager)
	if err != nil {
		return domain.ChunkSecret{}, apiError(what, err)
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("updated inventory secret", "secret", s.Name, "lineage", s.Labels[domain.LabelLineage])
	return updated, nil
}

// withoutData is c without its data: writeChunk sends the data itself, not a copy (a Secret
// about to be written is encoded into the request and dropped), so the chunk, up to 1 MiB,
// need not be copied first.
func withoutData(c domain.ChunkSecret) domain.ChunkSecret {
	c.Data = nil
	return c
}

// metadataOnly asks the API server to answer with the object's metadata alone.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// writeChunk creates (or, with update, replaces) secret with data and returns it as stored. The
// API server answers with its metadata only, so a chunk of up to 1 MiB is not read back and
// decoded once more; the data returned is the data written, shared with it (the API server
// stores a Secret's data as given).
func (st *SecretStore) writeChunk(ctx context.Context, secret *corev1.Secret, data map[string][]byte, update bool, manager string) (domain.ChunkSecret, error) {
	secret.Data = data
	req := st.rest.Post().Namespace(st.namespace).Resource("secrets")
	if update {
		req = st.rest.Put().Namespace(st.namespace).Resource("secrets").Name(secret.Name)
	}
	// As the typed client does: protobuf unless the client was configured with a content type.
	res := req.Param("fieldManager", manager).UseProtobufAsDefault().Body(secret).SetHeader("Accept", metadataOnly).Do(ctx)
	if err := res.Error(); err != nil {
		return domain.ChunkSecret{}, err
	}
	raw, _ := res.Raw()
	var stored metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &stored); err != nil {
		return domain.ChunkSecret{}, fmt.Errorf("reading the API server's answer: %w", err)
	}
	out := chunkFromSecret(&corev1.Secret{ObjectMeta: stored.ObjectMeta, Type: secret.Type})
	out.Data = maps.Clone(data)
	return out, nil
}

// atVersion returns the Secret to modify: built from the cached metadata when it is exactly at
// resourceVersion rv (one version of one object: this saves a GET; the caller replaces the data
// anyway), else the live object. The update carries rv, so the API server still refuses a change.
func (st *SecretStore) atVersion(ctx context.Context, name, rv string) (*corev1.Secret, error) {
	if st.synced() {
		if cached, ok := st.cached.Get(name); ok && cached.ResourceVersion == rv {
			return &corev1.Secret{ObjectMeta: *cached.ObjectMeta.DeepCopy(), Type: domain.SecretType}, nil
		}
	}
	return st.secrets.Get(ctx, name, metav1.GetOptions{})
}

// admit refuses writes outside the inventory namespace and of Secrets that are not ours.
func (st *SecretStore) admit(verb string, s domain.ChunkSecret) error {
	if s.Namespace != st.namespace {
		return fmt.Errorf("%s inventory secret %s/%s: %w %q", verb, s.Namespace, s.Name, ports.ErrOutsideInventoryNamespace, st.namespace)
	}
	if !s.Owned() {
		return fmt.Errorf("%s inventory secret %s/%s: it lacks label %s=%s or type %s; refusing to write a secret this controller does not manage",
			verb, s.Namespace, s.Name, domain.LabelManagedBy, domain.ManagedByValue, domain.SecretType)
	}
	return nil
}
