package main

import (
	"context"
	"fmt"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// GetChunk serves a Secret inspect already listed. Recording reads a name only after a create
// (which inspect refuses), so the dry run never gets here with a name it has not listed.
func (s readOnlyStore) GetChunk(_ context.Context, name string) (domain.ChunkSecret, error) {
	for _, c := range s.secrets {
		if c.Name == name {
			return c.Clone(), nil
		}
	}
	return domain.ChunkSecret{}, fmt.Errorf("inspect listed no secret %s of lineage %s: %w", name, s.lineage, ports.ErrNotFound)
}
