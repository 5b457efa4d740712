package contract

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// uniqueName is prefix plus 10 random hex characters, so a shared API server never sees a
// name twice.
func uniqueName(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + "-" + hex.EncodeToString(b)
}

// uniqueLineage is a fresh valid lineage.
func uniqueLineage(t testing.TB) domain.Lineage {
	t.Helper()
	l, err := domain.NewLineage(uniqueName("ct"))
	if err != nil {
		t.Fatalf("building a lineage: %v", err)
	}
	return l
}

// uniqueUUID is a random version-4 UUID.
func uniqueUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ourChunk is a Secret as the recorder writes it, with one data value.
func ourChunk(h Harness, name string, lineage domain.Lineage, data []byte) domain.ChunkSecret {
	return domain.ChunkSecret{
		Namespace: h.InventoryNamespace(),
		Name:      name,
		Type:      domain.SecretType,
		Labels: map[string]string{
			domain.LabelManagedBy: domain.ManagedByValue,
			domain.LabelLineage:   lineage.String(),
		},
		Annotations: map[string]string{domain.AnnotationFormat: domain.FormatVersion},
		Data:        map[string][]byte{domain.SecretDataKey: data},
	}
}
