package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"
)

// AnnotationArmed arms a hand-off with its digest, set before the commit. Every tombstone of it
// is disabled unless Eno's live read of the Composition still finds this value, so removing or
// changing it disarms them all at once, across reloads and carries (design §6.2).
const AnnotationArmed = "eno.azure.io/tombstone-recovery-armed"

// ArmedOff is the value of AnnotationArmed that disarms for good: the watch writes it, and an
// operator may; recovery never arms a Composition that carries it.
const ArmedOff = "disarmed"

// HandoffDisarmed reports whether c carries ArmedOff.
func (c Composition) HandoffDisarmed() bool { return c.Annotations[AnnotationArmed] == ArmedOff }

// Armed reports whether c's AnnotationArmed holds a digest: neither empty, ArmedOff nor ArmedDone.
func (c Composition) Armed() bool {
	a := c.Annotations[AnnotationArmed]
	return a != "" && a != ArmedOff && a != ArmedDone
}

// ArmedDone is the value of AnnotationArmed once Eno has acted on every tombstone of the hand-off.
// Like any value but the digest it disarms them all; unlike ArmedOff it lets a later hand-off arm.
const ArmedDone = "done"

// digestLen is how many hex digits of SHA-256 a hand-off's digest keeps.
const digestLen = 16

// handoffDigest names one hand-off: the synthesis it is for, the write time of its history and
// each tombstone's identity and the UID recovery saw, in the order given (canonical).
func handoffDigest(uuid string, written time.Time, tombstones []Tombstone) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", uuid, written.UTC().Format(time.RFC3339))
	for _, t := range tombstones {
		fmt.Fprintf(h, "%s\t%s\n", t.Entry.ID(), t.UID)
	}
	return hex.EncodeToString(h.Sum(nil))[:digestLen]
}

// celLiteral is what a value interpolated into a precondition may hold: a UID, a digest or an
// RFC 3339 time. Nothing that could end a CEL string literal passes.
var celLiteral = lazyRegexp(`^[A-Za-z0-9:.-]{1,64}$`)

// Precondition is the CEL condition under which one tombstone stops being disabled, evaluated
// by Eno against its own live read of the object (`self`) and the Composition it acts for.
// Every part must hold:
//   - the object is the one recovery saw (its UID);
//   - with managedFields entries of the object itself (subresources aside), each is one of Eno's
//     field managers and carries a time no newer than the history's write time, to the second
//     (an entry without a time is unknown, so false); without any, the object is bare (IsBare);
//   - the Composition is neither deleting nor paused (disable-reconciliation "true" on it);
//   - the Composition carries AnnotationArmed with the hand-off's digest.
//
// A missing field is an evaluation error, and Eno then applies nothing: the tombstone stays
// disabled. Eno applies an override whose condition fails to compile unconditionally, so the
// condition is one fixed template whose values must match celLiteral, else nothing is written.
func Precondition(uid string, eno EnoManagers, written time.Time, digest string) (string, error) {
	at := written.UTC().Truncate(time.Second).Format(time.RFC3339)
	for _, v := range []string{uid, at, digest} {
		if !celLiteral().MatchString(v) {
			return "", fmt.Errorf("%q cannot be written into a tombstone's precondition", v)
		}
	}
	return strings.Join([]string{
		`self.metadata.uid == "` + uid + `"`,
		`((has(self.metadata.managedFields) && self.metadata.managedFields.exists(m, !has(m.subresource) || m.subresource == "")) ? ` +
			`self.metadata.managedFields.all(m, (has(m.subresource) && m.subresource != "") || ` +
			`(m.manager in ` + celStrings(eno.Names()) + ` && has(m.time) && timestamp(m.time) <= timestamp("` + at + `"))) : ` + celBare() + `)`,
		`composition.metadata.deletionTimestamp == null`,
		`!("` + AnnotationDisableReconciliation + `" in composition.metadata.annotations && composition.metadata.annotations["` + AnnotationDisableReconciliation + `"] == "true")`,
		`composition.metadata.annotations["` + AnnotationArmed + `"] == "` + digest + `"`,
	}, " && "), nil
}

// selfCheckingManifest is the tombstone's manifest: the recorded entry with reconciliation
// disabled, and overrides (not the recorded ones) that enable it when Precondition holds.
func selfCheckingManifest(t Tombstone, eno EnoManagers, written time.Time, digest string) (string, error) {
	cond, err := Precondition(t.UID, eno, written, digest)
	if err != nil {
		return "", fmt.Errorf("the tombstone of %s: %w", t.Entry.ID(), err)
	}
	// The first override keeps it disabled unless the precondition holds: should an Eno whose
	// CEL differs fail to compile the condition, its decoding stops at this element and applies
	// it unconditionally, so the object is kept, never deleted.
	overrides, err := json.Marshal([]selfCheckOverride{
		{Path: selfCheckPath, Value: "true", Condition: "!(" + cond + ")"},
		{Path: selfCheckPath, Value: "false", Condition: cond},
	})
	if err != nil {
		return "", err
	}
	b, err := tombstoneJSON(t.Entry, TombstoneAnnotations(t.Entry.Annotations, string(overrides)))
	return string(b), err
}

// TombstoneAnnotations are a self-checking tombstone's annotations: the recorded ones, with
// reconciliation disabled and overrides the self-check, whatever was recorded for either. A
// recorded disable-reconciliation "false" never survives: Eno reads the resource's own value
// before the Composition's, so where the precondition applies nothing (it fails to evaluate:
// the arming annotation removed, a field missing) a "false" would beat the Composition's pause;
// "true" keeps the object, and the precondition's own pause check covers the rest (design
// §6.2, recorded "false" beats a pause). The recorded map is not changed.
func TombstoneAnnotations(recorded map[string]string, overrides string) map[string]string {
	annotations := make(map[string]string, len(recorded)+2)
	maps.Copy(annotations, recorded)
	annotations[AnnotationDisableReconciliation] = "true" // a recorded "false" is dropped
	annotations[AnnotationOverrides] = overrides          // the recorded overrides are dropped
	return annotations
}

// selfCheckOverride is the one override of a self-checking tombstone.
type selfCheckOverride struct {
	Path      string `json:"path"`
	Value     string `json:"value"`
	Condition string `json:"condition"`
}

var (
	selfCheckPath   = "self.metadata.annotations['" + AnnotationDisableReconciliation + "']"
	selfCheckUID    = lazyRegexp(`^self\.metadata\.uid == "([A-Za-z0-9:.-]{1,64})" && `)
	selfCheckDigest = lazyRegexp(` && composition\.metadata\.annotations\["` + regexp.QuoteMeta(AnnotationArmed) + `"\] == "([A-Za-z0-9:.-]{1,64})"$`)
)

// readSelfCheck reads back the UID and hand-off digest a tombstone's self-check of ours names.
func readSelfCheck(annotations map[string]string) (uid, digest string, ok bool) {
	raw, has := annotations[AnnotationOverrides]
	if !has || annotations[AnnotationDisableReconciliation] != "true" {
		return "", "", false
	}
	var ops []selfCheckOverride
	if err := json.Unmarshal([]byte(raw), &ops); err != nil || len(ops) != 2 ||
		ops[0] != (selfCheckOverride{Path: selfCheckPath, Value: "true", Condition: "!(" + ops[1].Condition + ")"}) ||
		ops[1].Path != selfCheckPath || ops[1].Value != "false" {
		return "", "", false
	}
	u := selfCheckUID().FindStringSubmatch(ops[1].Condition)
	d := selfCheckDigest().FindStringSubmatch(ops[1].Condition)
	if u == nil || d == nil {
		return "", "", false
	}
	return u[1], d[1], true
}
