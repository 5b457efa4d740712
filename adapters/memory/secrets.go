package memory

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// maxSecretData is the API server's limit on the sum of a Secret's data values.
const maxSecretData = 1 << 20

// ListChunks lists every Secret in the inventory namespace carrying the lineage label,
// whoever wrote it, sorted by name.
func (c *Cluster) ListChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("listing secrets of lineage %s: %w", lineage, err)
	}
	if lineage.IsZero() {
		return nil, errors.New("listing secrets: the lineage is empty, which would select nothing meaningful")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []domain.ChunkSecret
	for k, s := range c.secrets {
		if k.namespace != c.inventoryNamespace {
			continue
		}
		if v, ok := s.Labels[domain.LabelLineage]; ok && v == lineage.String() {
			out = append(out, s.Clone())
		}
	}
	slices.SortFunc(out, func(a, b domain.ChunkSecret) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// ListCachedChunks is ListChunks: the memory adapter has no cache to lag.
func (c *Cluster) ListCachedChunks(ctx context.Context, lineage domain.Lineage) ([]domain.ChunkSecret, error) {
	out, err := c.ListChunks(ctx, lineage)
	for i := range out {
		out[i].Data = nil // as the Kubernetes adapter's cache: metadata only
	}
	return out, err
}

// GetChunk reads the Secret of that name in the inventory namespace, whoever wrote it.
func (c *Cluster) GetChunk(ctx context.Context, name string) (domain.ChunkSecret, error) {
	if err := ctx.Err(); err != nil {
		return domain.ChunkSecret{}, fmt.Errorf("reading secret %s/%s: %w", c.inventoryNamespace, name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.secrets[objectKey{c.inventoryNamespace, name}]
	if !ok {
		return domain.ChunkSecret{}, fmt.Errorf("reading secret %s/%s: %w", c.inventoryNamespace, name, ports.ErrNotFound)
	}
	return s.Clone(), nil
}

// CreateChunk creates the Secret; ErrAlreadyExists when the name is taken.
func (c *Cluster) CreateChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
	key := objectKey{s.Namespace, s.Name}
	if err := c.checkInventorySecret("creating", s); err != nil {
		return domain.ChunkSecret{}, err
	}
	if s.ResourceVersion != "" {
		return domain.ChunkSecret{}, fmt.Errorf("creating secret %s: resourceVersion must be empty on create, got %q", key, s.ResourceVersion)
	}
	if err := c.runBeforeWrite(ctx, OpCreateChunk, key); err != nil {
		return domain.ChunkSecret{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.secrets[key]; ok {
		return domain.ChunkSecret{}, fmt.Errorf("creating secret %s: %w; re-read it and update instead", key, ports.ErrAlreadyExists)
	}
	return c.storeSecret(s), nil
}

// UpdateChunk replaces the Secret if s.ResourceVersion is the stored one; ErrConflict otherwise,
// including when s.ResourceVersion is empty.
func (c *Cluster) UpdateChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
	key := objectKey{s.Namespace, s.Name}
	if err := c.checkInventorySecret("updating", s); err != nil {
		return domain.ChunkSecret{}, err
	}
	if err := c.runBeforeWrite(ctx, OpUpdateChunk, key); err != nil {
		return domain.ChunkSecret{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.secrets[key]
	if !ok {
		return domain.ChunkSecret{}, fmt.Errorf("updating secret %s: %w", key, ports.ErrNotFound)
	}
	if s.ResourceVersion == "" || s.ResourceVersion != cur.ResourceVersion {
		return domain.ChunkSecret{}, fmt.Errorf("updating secret %s at resourceVersion %q (stored %q): %w; re-read and retry",
			key, s.ResourceVersion, cur.ResourceVersion, ports.ErrConflict)
	}
	if s.Type != cur.Type {
		return domain.ChunkSecret{}, fmt.Errorf("updating secret %s: type is immutable (%q to %q)", key, cur.Type, s.Type)
	}
	return c.storeSecret(s), nil
}

// MarkChunk is UpdateChunk: a write that leaves the data as it is keeps its write time.
func (c *Cluster) MarkChunk(ctx context.Context, s domain.ChunkSecret) (domain.ChunkSecret, error) {
	return c.UpdateChunk(ctx, s)
}

// checkInventorySecret applies what the store and the API server refuse before any write.
func (c *Cluster) checkInventorySecret(verb string, s domain.ChunkSecret) error {
	key := objectKey{s.Namespace, s.Name}
	if s.Namespace != c.inventoryNamespace {
		return fmt.Errorf("%s secret %s: the store writes only to %s: %w", verb, key, c.inventoryNamespace, ports.ErrOutsideInventoryNamespace)
	}
	return validateSecret(verb, s)
}

// validateSecret mirrors the API server's validation of the fields the domain sets.
func validateSecret(verb string, s domain.ChunkSecret) error {
	key := objectKey{s.Namespace, s.Name}
	if s.Name == "" || len(s.Name) > 253 {
		return fmt.Errorf("%s secret %s: name must be 1 to 253 characters", verb, key)
	}
	if size := s.DataSize(); size > maxSecretData {
		return fmt.Errorf("%s secret %s: data holds %d bytes, over the API server's limit of %d", verb, key, size, maxSecretData)
	}
	for k := range s.Data {
		if !validDataKey(k) {
			return fmt.Errorf("%s secret %s: data key %q must consist of alphanumerics, '-', '_' or '.'", verb, key, k)
		}
	}
	return nil
}

func validDataKey(k string) bool {
	if k == "" || len(k) > 253 || k == "." || k == ".." {
		return false
	}
	for i := 0; i < len(k); i++ {
		ch := k[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			return false
		}
	}
	return true
}

// storeSecret stores a copy of s at a new resourceVersion and returns another copy.
// Callers hold the lock.
func (c *Cluster) storeSecret(s domain.ChunkSecret) domain.ChunkSecret {
	stored := s.Clone()
	stored.ResourceVersion = c.nextVersion()
	// Like managedFields: the time of the write that last changed the data.
	if prev, ok := c.secrets[objectKey{s.Namespace, s.Name}]; ok && dataEqual(prev.Data, s.Data) {
		stored.DataWrittenAt = prev.DataWrittenAt
	} else {
		stored.DataWrittenAt = c.now()
	}
	c.secrets[objectKey{s.Namespace, s.Name}] = stored
	return stored.Clone()
}

// PutSecret writes s as another client would: created, or replaced whatever its
// resourceVersion, in any namespace. For hostile-input tests and the demo. Like another field
// manager's write, one that writes the data leaves the data's write time unknown
// (domain.DataWrittenByUs).
func (c *Cluster) PutSecret(s domain.ChunkSecret) (domain.ChunkSecret, error) {
	if err := validateSecret("putting", s); err != nil {
		return domain.ChunkSecret{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{s.Namespace, s.Name}
	prev, existed := c.secrets[key]
	stored := c.storeSecret(s)
	if existed && dataEqual(prev.Data, s.Data) {
		return stored, nil
	}
	written := c.secrets[key]
	written.DataWrittenAt = time.Time{}
	c.secrets[key] = written
	return written.Clone(), nil
}

// GetSecret returns the Secret; ErrNotFound when absent.
func (c *Cluster) GetSecret(namespace, name string) (domain.ChunkSecret, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.secrets[objectKey{namespace, name}]
	if !ok {
		return domain.ChunkSecret{}, fmt.Errorf("getting secret %s/%s: %w", namespace, name, ports.ErrNotFound)
	}
	return s.Clone(), nil
}

// DeleteSecret removes the Secret as an operator would; ErrNotFound when absent.
// The SnapshotStore port never deletes.
func (c *Cluster) DeleteSecret(namespace, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := objectKey{namespace, name}
	if _, ok := c.secrets[key]; !ok {
		return fmt.Errorf("deleting secret %s: %w", key, ports.ErrNotFound)
	}
	delete(c.secrets, key)
	return nil
}

// Secrets lists every Secret in every namespace, sorted by namespace and name.
func (c *Cluster) Secrets() []domain.ChunkSecret {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]domain.ChunkSecret, 0, len(c.secrets))
	for _, s := range c.secrets {
		out = append(out, s.Clone())
	}
	slices.SortFunc(out, func(a, b domain.ChunkSecret) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func dataEqual(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
