package ports

import (
	"context"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// SnapshotLister is the read half of SnapshotStore, for a use case that must not be able to
// write (inspect).
//
//counterfeiter:generate . SnapshotLister
type SnapshotLister interface {
	// ListChunks lists every Secret carrying the lineage label, live, as SnapshotStore does.
	ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error)
}
