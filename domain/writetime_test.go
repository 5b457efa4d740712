package domain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The history's write time is when this controller wrote the data: only its own entries count,
// and anything that says someone else wrote the data after it, or re-created the Secret, makes
// the time unknown (design §6.3, stripped history).
func TestDataWrittenByUs(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(time.Hour)
	ours := func(at time.Time) ManagedWrite { return ManagedWrite{Manager: FieldManager, Time: at, OwnsData: true} }
	other := func(at time.Time) ManagedWrite { return ManagedWrite{Manager: "velero", Time: at, OwnsData: true} }
	tests := []struct {
		name    string
		created time.Time
		writes  []ManagedWrite
		want    time.Time // zero: unknown
	}{
		{"our create", t0, []ManagedWrite{ours(t0)}, t0},
		{"our newest data write", t0, []ManagedWrite{ours(t0), ours(t1)}, t1},
		{"no managedFields (stripped): unknown", t0, nil, time.Time{}},
		{"only another manager's: unknown", t0, []ManagedWrite{other(t0)}, time.Time{}},
		{"our entry owns no data (another took it over): unknown", t0, []ManagedWrite{{Manager: FieldManager, Time: t0}, other(t1)}, time.Time{}},
		{"another wrote the data after us: unknown", t0, []ManagedWrite{ours(t0), other(t1)}, time.Time{}},
		{"another wrote the data before us: ours", t0, []ManagedWrite{other(t0), ours(t1)}, t1},
		{"another wrote the data in our second: ours", t0, []ManagedWrite{ours(t1), other(t1.Add(500 * time.Millisecond))}, t1},
		{"another's data write without a time: unknown", t0, []ManagedWrite{ours(t1), {Manager: "velero", OwnsData: true}}, time.Time{}},
		{"another's unreadable entry, newer: unknown", t0, []ManagedWrite{ours(t0), {Manager: "velero", Time: t1, Unreadable: true}}, time.Time{}},
		{"another's newer write of metadata only: ours", t0, []ManagedWrite{ours(t0), {Manager: "velero", Time: t2}}, t0},
		{"our unreadable entry is no data write", t0, []ManagedWrite{ours(t0), {Manager: FieldManager, Time: t2, Unreadable: true}}, t0},
		{"our newer metadata write is no data write", t0, []ManagedWrite{ours(t0), {Manager: FieldManager, Time: t2}}, t0},
		{"our entry on a subresource is not a data write", t0, []ManagedWrite{{Manager: FieldManager, Subresource: "status", Time: t0, OwnsData: true}}, time.Time{}},
		{"re-created after our write, entry copied: unknown", t1, []ManagedWrite{ours(t0)}, time.Time{}},
		{"created in our write's second", t0.Add(300 * time.Millisecond), []ManagedWrite{ours(t0)}, t0},
		{"no creationTimestamp: unknown", time.Time{}, []ManagedWrite{ours(t0)}, time.Time{}},
		{"in another zone, the same instant in UTC", t0, []ManagedWrite{ours(t1.In(time.FixedZone("CEST", 2*3600)))}, t1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, known := DataWrittenByUs(tt.created, tt.writes)
			assert.Equal(t, !tt.want.IsZero(), known)
			assert.True(t, tt.want.Equal(got), "want %s, got %s", tt.want, got)
			if known {
				assert.Equal(t, time.UTC, got.Location())
			}
		})
	}
}
