package ports

import (
	"context"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// InventoryPruner lists and deletes inventory Secrets for `tombstone-recovery prune`, which an
// operator runs with their own credentials. The controller is never given one: its RBAC cannot
// delete Secrets, and internal/archtest keeps every delete out of its wiring (design §7).
//
//counterfeiter:generate . InventoryPruner
type InventoryPruner interface {
	// ListInventory lists every Secret of the inventory namespace carrying the lineage label,
	// ours or not, live, with its UID, resourceVersion and data write time.
	ListInventory(ctx context.Context) ([]domain.ChunkSecret, error)
	// ListChunks lists the lineage's Secrets as ListInventory does.
	ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error)
	// DeleteChunk deletes the Secret with its UID and resourceVersion as preconditions:
	// ErrConflict when either changed, ErrNotFound when it is gone. It refuses a Secret that is
	// not ours, or outside the inventory namespace.
	DeleteChunk(ctx context.Context, s domain.ChunkSecret) error
}
