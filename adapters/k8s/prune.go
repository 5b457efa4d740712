package k8s

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// InventoryPruner is the only adapter that deletes an inventory Secret. Only the prune command,
// run by an operator with their own credentials, builds one (design §7, internal/archtest).
type InventoryPruner struct {
	secrets   corev1client.SecretInterface
	namespace string
}

// NewInventoryPruner binds the pruner to the inventory namespace. Every read is live.
func NewInventoryPruner(secrets corev1client.SecretsGetter, namespace string) (*InventoryPruner, error) {
	if secrets == nil || namespace == "" {
		return nil, errors.New("inventory pruner: a secrets client and the inventory namespace are required")
	}
	return &InventoryPruner{secrets: secrets.Secrets(namespace), namespace: namespace}, nil
}

// ListInventory lists every Secret with the lineage label, ours or not, paginated.
func (p *InventoryPruner) ListInventory(ctx context.Context) ([]domain.ChunkSecret, error) {
	req, err := labels.NewRequirement(domain.LabelLineage, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	return listChunks(ctx, p.secrets, "listing inventory secrets in namespace "+p.namespace, labels.NewSelector().Add(*req).String(), pruneListPage)
}

// ListChunks lists the lineage's Secrets, ours or not.
func (p *InventoryPruner) ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	return listLineage(ctx, p.secrets, p.namespace, lineage, labels.Set{}, pruneListPage)
}

// pruneListPage bounds one list response: a page holds up to this many Secrets of up to 1 MiB.
const pruneListPage = 16

// DeleteChunk deletes s if its UID and resourceVersion are still those read.
func (p *InventoryPruner) DeleteChunk(ctx context.Context, s domain.ChunkSecret) error {
	what := fmt.Sprintf("deleting inventory secret %s/%s", p.namespace, s.Name)
	switch {
	case s.Namespace != p.namespace:
		return fmt.Errorf("%s: %w %q", what, ports.ErrOutsideInventoryNamespace, p.namespace)
	case !s.Owned():
		return fmt.Errorf("%s: it lacks label %s=%s or type %s; refusing to delete a secret this project does not manage",
			what, domain.LabelManagedBy, domain.ManagedByValue, domain.SecretType)
	case s.UID == "" || s.ResourceVersion == "":
		return fmt.Errorf("%s: no UID or resourceVersion to use as preconditions: %w", what, ports.ErrConflict)
	}
	uid, rv := types.UID(s.UID), s.ResourceVersion
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	if err := p.secrets.Delete(ctx, s.Name, opts); err != nil {
		return apiError(what, err)
	}
	return nil
}
