package domain

// Exact strings. Other tools and tests depend on them (design §3).
const (
	AnnotationOptIn           = "eno.azure.io/tombstone-recovery"
	OptInValue                = "enabled"
	AnnotationLineageOverride = "eno.azure.io/inventory-lineage"
	AnnotationDecision        = "eno.azure.io/tombstone-recovery-decision"
	AnnotationReview          = "eno.azure.io/tombstone-recovery-review"

	DefaultInventoryNamespace = "kube-system"
	SecretType                = "eno.azure.io/inventory-snapshot"
	SecretDataKey             = "inventory.json"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "eno-tombstone-recovery"
	LabelLineage   = "eno.azure.io/inventory-lineage"

	AnnotationCompositionNamespace = "eno.azure.io/composition-namespace"
	AnnotationCompositionName      = "eno.azure.io/composition-name"
	AnnotationCompositionUID       = "eno.azure.io/composition-uid"
	AnnotationSourceSynthesisUUID  = "eno.azure.io/source-synthesis-uuid"
	AnnotationSourceSynthesisTime  = "eno.azure.io/source-synthesis-timestamp"
	AnnotationChunkIndex           = "eno.azure.io/inventory-chunk-index"
	AnnotationChunkCount           = "eno.azure.io/inventory-chunk-count"
	AnnotationDigest               = "eno.azure.io/inventory-digest"
	AnnotationFormat               = "eno.azure.io/inventory-format"
	FormatVersion                  = "2"
	// FormatUnresolved is format 2 plus, in chunk 0, UnresolvedDataKey with its own digest.
	FormatUnresolved           = "3"
	UnresolvedDataKey          = "unresolved.json"
	AnnotationUnresolvedDigest = "eno.azure.io/unresolved-digest"
	// AnnotationUnresolvedDismissed on chunk 0, set by an operator: {"snapshot":"<uuid>","ids":["<id>",…]}.
	AnnotationUnresolvedDismissed = "eno.azure.io/unresolved-dismissed"
	// AnnotationControlPlane names the control plane that wrote the Secret (design §3).
	AnnotationControlPlane = "eno.azure.io/control-plane"

	// Eno's per-resource annotations that decide whether and how Eno acts on a tombstone. An
	// inventory records them verbatim, and a tombstone carries them back to Eno.
	AnnotationReadinessGroup        = "eno.azure.io/readiness-group"
	AnnotationDeletionGroup         = "eno.azure.io/deletion-group"
	AnnotationDisableReconciliation = "eno.azure.io/disable-reconciliation"
	AnnotationDeletionStrategy      = "eno.azure.io/deletion-strategy"
	AnnotationFailOpen              = "eno.azure.io/fail-open"
	AnnotationOverrides             = "eno.azure.io/overrides"

	// DefaultMaxChunkBytes is the API server's limit on the sum of a Secret's data values.
	DefaultMaxChunkBytes = 1 << 20
	// SecretDataLimit is the hard ceiling on a stored chunk's data, whatever the configured limit.
	SecretDataLimit = 1 << 20
	// DefaultMaxChunks guards kube-system against runaway inventories.
	DefaultMaxChunks = 64
	// DefaultMaxTombstoneFraction is the deletion guard's default (design §6.1).
	DefaultMaxTombstoneFraction = 0.5
	// MaxClockSkew is how far ahead of the reader's clock a snapshot timestamp may be.
	MaxClockSkew = 5 * 60 // seconds

	// maxObjectName is the longest name the API server accepts for Secrets and ResourceSlices.
	maxObjectName = 253

	enoAPIVersion = "eno.azure.io/v1"
	patchKind     = "Patch"
)
