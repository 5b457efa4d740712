package domain

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Outcome is a recovery decision's result (design §6).
type Outcome struct{ name string }

var (
	OutcomeNoInventory      = Outcome{"NoInventory"}
	OutcomeInventoryInvalid = Outcome{"InventoryInvalid"}
	OutcomeNothingToRecover = Outcome{"NothingToRecover"}
	OutcomeRecovered        = Outcome{"Recovered"}
	OutcomeHeldForReview    = Outcome{"HeldForReview"}
)

var outcomes = []Outcome{OutcomeNoInventory, OutcomeInventoryInvalid, OutcomeNothingToRecover, OutcomeRecovered, OutcomeHeldForReview}

func (o Outcome) String() string { return o.name }
func (o Outcome) IsZero() bool   { return o.name == "" }

// Finished reports whether the decision ends recovery for its synthesis. Only HeldForReview does not.
func (o Outcome) Finished() bool { return o.name != "" && o != OutcomeHeldForReview }

func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.name), nil }

func (o *Outcome) UnmarshalText(b []byte) error {
	i := slices.IndexFunc(outcomes, func(v Outcome) bool { return v.name == string(b) })
	if i < 0 {
		return fmt.Errorf("unknown recovery outcome %q", b)
	}
	*o = outcomes[i]
	return nil
}

// Reasons carried by decisions besides the InventoryInvalid ones.
const (
	ReasonSameIncarnation   = "SameIncarnation"
	ReasonNoOrphans         = "NoOrphans"
	ReasonRejected          = "Rejected"
	ReasonOverDeletionGuard = "OverDeletionGuard"
	ReasonApproved          = "Approved"
	ReasonAlreadyDecided    = "AlreadyDecided"
	ReasonUnverified        = "Unverified"
	// ReasonOtherNamespace: OtherNamespaceError (design §5 step 3).
	ReasonOtherNamespace = "OtherNamespace"
	// ReasonFirstSynthesisPending: a Composition still unsynthesized past the wait (design §6.3).
	ReasonFirstSynthesisPending = "FirstSynthesisPending"
)

// Decision is the JSON of the decision annotation, fields in the specified order.
type Decision struct {
	SynthesisUUID            string     `json:"synthesisUUID"`
	Outcome                  Outcome    `json:"outcome"`
	Reason                   string     `json:"reason"`
	Message                  string     `json:"message"`
	SourceSynthesisUUID      string     `json:"sourceSynthesisUUID"`
	SourceSynthesisTimestamp *time.Time `json:"sourceSynthesisTimestamp"`
	Tombstones               int        `json:"tombstones"`
	TombstoneSlice           string     `json:"tombstoneSlice"`
	DecidedAt                time.Time  `json:"decidedAt"`
	// RecoveredFrom is the source synthesis UUID this incarnation has recovered from, or chose
	// not to; it is carried over by decisions that do not set it.
	RecoveredFrom string `json:"recoveredFrom"`
}

// SetsRecoveredFrom reports whether a decision of this outcome and reason records its source
// in recoveredFrom: Recovered, and NothingToRecover for NoOrphans, Rejected and AlreadyDecided.
func (d Decision) SetsRecoveredFrom() bool {
	return d.Outcome == OutcomeRecovered || d.Outcome == OutcomeNothingToRecover &&
		(d.Reason == ReasonNoOrphans || d.Reason == ReasonRejected || d.Reason == ReasonAlreadyDecided)
}

// Encode renders the annotation value.
func (d Decision) Encode() string {
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("encoding decision: %v", err)) // plain values only
	}
	return string(b)
}

// ParseDecision parses the annotation value.
func ParseDecision(s string) (Decision, error) {
	var d Decision
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return Decision{}, fmt.Errorf("parsing %s: %w", AnnotationDecision, err)
	}
	if d.SynthesisUUID == "" || d.Outcome.IsZero() {
		return Decision{}, fmt.Errorf("parsing %s: synthesisUUID and outcome are required", AnnotationDecision)
	}
	return d, nil
}

// SameAs reports whether two decisions say the same thing, ignoring when they were made.
func (d Decision) SameAs(o Decision) bool {
	d.DecidedAt, o.DecidedAt = time.Time{}, time.Time{}
	return d.Encode() == o.Encode()
}
