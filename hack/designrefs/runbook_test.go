package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A reason the domain declares, as a literal of a reason type or as a Reason constant, must be
// named in the runbook section, not elsewhere in the README; test files and other packages do
// not count.
func TestCheckRunbook(t *testing.T) {
	domainGo := "package domain\n\n" +
		"var DropNotFound = DropReason{\"NotFound\"}\n" +
		"var OutcomeHeld = Outcome{\"HeldForReview\"}\n" +
		"var ReasonMalformed = InvalidReason{\"Malformed\"}\n" +
		"const (\n\tReasonRejected = \"Rejected\"\n\tFieldManager = \"eno-tombstone-recovery\"\n)\n" +
		"var other = Scope{\"NotAReason\"}\n"
	section := "# x\n\n## " + runbookHeading + "\n\n| `NotFound` | `HeldForReview` | `Malformed` |"
	for _, tc := range []struct {
		name   string
		readme string
		extra  map[string]string
		want   []string
	}{
		{name: "every reason named", readme: section + " `Rejected` |\n\n## Next\n"},
		{name: "a constant reason missing from the section, named only after it",
			readme: section + "\n\n## Next\n`Rejected`\n",
			want:   []string{"README.md:3: the runbook \"" + runbookHeading + "\" does not name `Rejected` (declared at domain/reasons.go:7)"}},
		{name: "a new drop reason",
			readme: section + " `Rejected` |\n",
			extra:  map[string]string{"domain/more.go": "package domain\n\nvar DropManaged = DropReason{\"ManagedElsewhere\"}\n"},
			want:   []string{"does not name `ManagedElsewhere` (declared at domain/more.go:3)"}},
		{name: "test files and other packages declare nothing",
			readme: section + " `Rejected` |\n",
			extra: map[string]string{"domain/x_test.go": "package domain\n\nvar d = DropReason{\"TestOnly\"}\n",
				"app/x.go": "package app\n\nconst ReasonApp = \"AppOnly\"\n"}},
		{name: "no runbook section",
			readme: "# x\n\n## Reading a decision\n`NotFound`\n",
			want:   []string{"README.md:0: has no section \"## " + runbookHeading + "\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"README.md": tc.readme, "domain/reasons.go": domainGo}
			for k, v := range tc.extra {
				files[k] = v
			}
			got := checkRunbook(files)
			assert.Len(t, got, len(tc.want), "%v", got)
			for i := range min(len(got), len(tc.want)) {
				assert.Contains(t, got[i].String(), tc.want[i])
			}
		})
	}
}
