package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// The downstream cluster's objects other than the inventory Secrets, as a test put them there.
// Each is kept as its manifest, by identity.

// downstreamObject is one object as the downstream API server stores it.
type downstreamObject struct {
	manifest string
	uid      string
	created  time.Time
	// written is the newest write of the object (its managedFields' one time): the creation,
	// or the last apply that changed the manifest.
	written time.Time
}

// applyDownstream creates the object, or replaces it keeping its UID and creation time, as an
// apply does; an apply that changes nothing is no write. Callers hold the lock.
func (c *Cluster) applyDownstream(id domain.ResourceID, manifest string) {
	obj, ok := c.downstream[id]
	if !ok {
		obj.created, obj.uid = c.now(), c.nextObjectUID()
	}
	if !ok || obj.manifest != manifest {
		obj.written = c.now()
	}
	obj.manifest = manifest
	c.downstream[id] = obj
}

// ObserveObject reads the object's metadata: absent, present with its UID, creation and write
// times, or
// unreadable when MarkUnreadable named it.
func (c *Cluster) ObserveObject(ctx context.Context, e domain.Entry) (domain.Observation, error) {
	if err := ctx.Err(); err != nil {
		return domain.Observation{}, fmt.Errorf("reading %s downstream: %w", e.ID(), err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if why, ok := c.unreadable[e.ID()]; ok {
		return domain.Observation{State: domain.ObjectUnreadable, Detail: why}, nil
	}
	obj, ok := c.downstream[e.ID()]
	if !ok {
		return domain.Observation{State: domain.ObjectAbsent}, nil
	}
	// As kube-apiserver tracks them: one entry of Eno's, unless the manifest has no field to own.
	var fields map[string]any
	if err := json.Unmarshal([]byte(obj.manifest), &fields); err == nil && domain.IsBare(fields) {
		return domain.Observation{State: domain.ObjectPresent, Created: obj.created, Bare: true, UID: obj.uid}, nil
	}
	return domain.Observation{State: domain.ObjectPresent, Created: obj.created, Writes: []domain.ObjectWrite{{Manager: "eno", Time: obj.written}}, UID: obj.uid}, nil
}

// MarkUnreadable makes reads of the object fail as a Forbidden or an unknown kind would; an
// empty why makes it readable again.
func (c *Cluster) MarkUnreadable(id domain.ResourceID, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if why == "" {
		delete(c.unreadable, id)
		return
	}
	c.unreadable[id] = why
}

// PutDownstream creates or replaces a downstream object, as a user applying manifest would.
func (c *Cluster) PutDownstream(manifest string) (domain.ResourceID, error) {
	m, err := parseManifest(manifest)
	if err != nil {
		return domain.ResourceID{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyDownstream(m.id, manifest)
	return m.id, nil
}

// DeleteDownstream removes a downstream object, as a user's delete would; absent is not an error.
func (c *Cluster) DeleteDownstream(id domain.ResourceID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.downstream, id)
}

// manifest is the identity of one Eno manifest.
type manifest struct {
	id domain.ResourceID
}

func parseManifest(raw string) (manifest, error) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return manifest{}, fmt.Errorf("manifest is not a JSON object: %w", err)
	}
	if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
		return manifest{}, fmt.Errorf("manifest lacks apiVersion, kind or metadata.name: %.80s", raw)
	}
	group := ""
	if i := strings.LastIndex(m.APIVersion, "/"); i >= 0 {
		group = m.APIVersion[:i]
	}
	return manifest{id: domain.ResourceID{Group: group, Kind: m.Kind, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}}, nil
}
