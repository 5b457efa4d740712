package app

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/Azure/eno-tombstone-recovery/domain"
	"github.com/Azure/eno-tombstone-recovery/ports"
)

// Config holds the switches and limits of the use cases.
type Config struct {
	// Enabled turns the operator on. The library default is off; the binary's flag default is on.
	Enabled bool
	// Scope is the sharding shared with eno-reconciler.
	Scope domain.Scope
	// InventoryNamespace is where chunk Secrets live in the downstream cluster.
	InventoryNamespace string
	// MaxChunkBytes bounds one chunk's inventory.json.
	MaxChunkBytes int
	// MaxChunks caps the chunks of one snapshot.
	MaxChunks int
	// MaxTombstoneFraction is the deletion guard (design §6.1); 1.0 disables it.
	MaxTombstoneFraction float64
	// PendingRecheckInterval is how often a pending hand-off is watched again (design §6.2).
	PendingRecheckInterval time.Duration
	// ReconcileTimeout bounds one reconcile; a reconcile past it is cancelled and retried.
	ReconcileTimeout time.Duration
	// AllowCrossNamespaceLineage lets a Composition with no history of its own adopt one recorded
	// in another namespace, and recording replace another namespace's Secrets once their
	// Composition is gone (design §4, §5 step 3). Off by default: an override is only an annotation.
	AllowCrossNamespaceLineage bool
	// ControlPlane names this control plane in the inventory Secrets it writes, and selects the
	// ones it reads (design §3): the UID of its kube-system Namespace unless an operator names it
	// (runnable always sets it). "" writes and reads Secrets that name none.
	ControlPlane string
	// EnoManagers are the field managers of the Eno that deletes; the zero value is Eno v0.2.17's.
	EnoManagers domain.EnoManagers
	// ResourceFilter is the --resource-filter of the eno-reconcilers in use; nil loads everything.
	ResourceFilter domain.ResourceFilter
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// DefaultConfig is the library default: everything as docs/design.md describes it, but disabled (design §4).
func DefaultConfig() Config {
	return Config{
		Enabled:                false,
		Scope:                  domain.Scope{Selector: domain.Everything},
		InventoryNamespace:     domain.DefaultInventoryNamespace,
		MaxChunkBytes:          domain.DefaultMaxChunkBytes,
		MaxChunks:              domain.DefaultMaxChunks,
		MaxTombstoneFraction:   domain.DefaultMaxTombstoneFraction,
		PendingRecheckInterval: DefaultPendingRecheckInterval,
		ReconcileTimeout:       DefaultReconcileTimeout,
	}
}

// DefaultPendingRecheckInterval is how often a pending hand-off is checked by default.
const DefaultPendingRecheckInterval = time.Minute

// firstSynthesisWait: a hand-off waits fifteen watch intervals for first syntheses, then is held (design §6.3).
func (c Config) firstSynthesisWait() time.Duration { return 15 * c.PendingRecheckInterval }

// DefaultReconcileTimeout bounds one reconcile by default.
const DefaultReconcileTimeout = 2 * time.Minute

// Setting names one field of Config, so that callers report a refusal in their own terms (a flag).
type Setting struct{ name string }

var (
	SettingInventoryNamespace     = Setting{"inventory namespace"}
	SettingMaxChunkBytes          = Setting{"max chunk bytes"}
	SettingMaxChunks              = Setting{"max chunks"}
	SettingMaxTombstoneFraction   = Setting{"max tombstone fraction"}
	SettingPendingRecheckInterval = Setting{"pending recheck interval"}
	SettingReconcileTimeout       = Setting{"reconcile timeout"}
	SettingControlPlane           = Setting{"control plane id"}
)

func (s Setting) String() string { return s.name }

// Flag is the name of the setting's flag (without "--"), which also names its variable.
func (s Setting) Flag() string { return strings.ReplaceAll(s.name, " ", "-") }

// SettingError is Validate's refusal: which setting, the rule it breaks, and the value given.
type SettingError struct {
	Setting Setting
	Rule    string // e.g. "must be at least 1"
	Got     string // the value, "" when there is nothing to show
}

func (e *SettingError) Error() string { return e.Named(e.Setting.name) }

// Named is the refusal with the setting called name: the flag or variable it came from.
func (e *SettingError) Named(name string) string {
	if e.Got == "" {
		return name + " " + e.Rule
	}
	return name + " " + e.Rule + ", got " + e.Got
}

// adoption is AllowCrossNamespaceLineage as domain reads it.
func (c Config) adoption() domain.Adoption {
	if c.AllowCrossNamespaceLineage {
		return domain.AdoptAcrossNamespaces
	}
	return domain.AdoptWithinNamespace
}

// Validate reports the first unusable setting as a *SettingError.
func (c Config) Validate() error {
	switch {
	case c.InventoryNamespace == "":
		return &SettingError{Setting: SettingInventoryNamespace, Rule: "must not be empty"}
	case c.MaxChunkBytes < 2 || c.MaxChunkBytes > domain.SecretDataLimit:
		return &SettingError{Setting: SettingMaxChunkBytes, Rule: fmt.Sprintf("must be between 2 and %d", domain.SecretDataLimit), Got: fmt.Sprint(c.MaxChunkBytes)}
	case c.MaxChunks < 1:
		return &SettingError{Setting: SettingMaxChunks, Rule: "must be at least 1", Got: fmt.Sprint(c.MaxChunks)}
	case math.IsNaN(c.MaxTombstoneFraction) || c.MaxTombstoneFraction < 0 || c.MaxTombstoneFraction > 1:
		return &SettingError{Setting: SettingMaxTombstoneFraction, Rule: "must be between 0 and 1", Got: fmt.Sprintf("%g", c.MaxTombstoneFraction)}
	case c.PendingRecheckInterval < time.Second:
		return &SettingError{Setting: SettingPendingRecheckInterval, Rule: "must be at least 1s", Got: c.PendingRecheckInterval.String()}
	case c.ReconcileTimeout <= 0:
		return &SettingError{Setting: SettingReconcileTimeout, Rule: "must be positive", Got: c.ReconcileTimeout.String()}
	case c.ControlPlane != "" && domain.ValidControlPlane(c.ControlPlane) != nil:
		return &SettingError{Setting: SettingControlPlane, Rule: "must be 1-63 letters, digits, '.', '_' or '-'", Got: fmt.Sprintf("%q", c.ControlPlane)}
	}
	return nil
}

// Deps are the adapters the use cases drive. Events and Metrics are optional.
type Deps struct {
	Compositions ports.CompositionReader
	Live         ports.LiveReader
	Slices       ports.SliceReader
	// Fleet answers what other Compositions produce and who carries a lineage (design §6.3).
	Fleet     ports.FleetIndex
	Store     ports.SnapshotStore
	Sink      ports.TombstoneSink
	Decisions ports.DecisionWriter
	// Downstream reads each tombstone's object before it is published (design §6.3).
	Downstream ports.DownstreamReader
	Events     ports.EventRecorder
	Metrics    ports.Metrics
}

func (d Deps) validate() error {
	names := []string{"Compositions", "Live", "Slices", "Fleet", "Store", "Sink", "Downstream", "Decisions"}
	for i, missing := range []bool{d.Compositions == nil, d.Live == nil, d.Slices == nil, d.Fleet == nil, d.Store == nil, d.Sink == nil, d.Downstream == nil, d.Decisions == nil} {
		if missing {
			return fmt.Errorf("app: dependency %s is nil", names[i])
		}
	}
	return nil
}

// Service runs the use cases. It starts no goroutines.
type Service struct {
	cfg     Config
	policy  domain.Policy
	deps    Deps
	planner planner
	// reviews holds, per Composition, the ignored review last announced (a domain.IgnoredReview);
	// marks, the markKey of the last synthesis checked for disabled entries (markDisabledLater).
	reviews *sync.Map
	marks   *sync.Map
	orphans *counts
	// unresolved counts the unresolved entries of each Composition's snapshot.
	kept *counts
}

// New validates the configuration and dependencies.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if err := deps.validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Scope.Selector = cmp.Or(cfg.Scope.Selector, domain.Everything)
	deps.Events = cmp.Or[ports.EventRecorder](deps.Events, noEvents{})
	deps.Metrics = cmp.Or[ports.Metrics](deps.Metrics, noMetrics{})
	return &Service{cfg: cfg, policy: domain.Policy{Enabled: cfg.Enabled, Scope: cfg.Scope}, deps: deps, planner: planner{
		cfg: cfg, secrets: deps.Store, slices: deps.Slices, fleet: deps.Fleet, live: deps.Live, downstream: deps.Downstream, failures: &readFailures{n: map[domain.ResourceID]int{}},
	}, reviews: &sync.Map{}, marks: &sync.Map{}, orphans: &counts{}, kept: &counts{}}, nil
}

type noEvents struct{}

func (noEvents) Normal(domain.Composition, string, string)  {}
func (noEvents) Warning(domain.Composition, string, string) {}

type noMetrics struct{}

func (noMetrics) ChunkWrite(string)                                                 {}
func (noMetrics) TombstoneAlert(string, int)                                        {}
func (noMetrics) Panicked(string)                                                   {}
func (noMetrics) SnapshotRecorded(bool)                                             {}
func (noMetrics) DecisionMade(domain.Outcome, string)                               {}
func (noMetrics) CompositionObserved(domain.CompositionRef, ports.CompositionState) {}
func (noMetrics) Refusal(string)                                                    {}
func (noMetrics) ChunksUsed(domain.Lineage, int, int)                               {}
func (noMetrics) LargestEntry(domain.Lineage, int, int)                             {}
func (noMetrics) ReconcileDone(time.Duration, error)                                {}
