//go:build eno

package eno

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

// Eno's per-resource annotations that make it skip a resource, and the recovery slice's record
// of its history's write time (design §3, design §6.2).
const (
	disableAnnotation         = "eno.azure.io/disable-reconciliation"
	overridesAnnotation       = "eno.azure.io/overrides"
	historyWrittenAnnotation  = "eno.azure.io/tombstone-recovery-history-written"
	inventoryFormatAnnotation = "eno.azure.io/inventory-format"
	inventoryFormat           = "2"
)

// pendingRecheck is the pending recheck interval of the scenarios that leave a hand-off
// pending (the default is a minute).
const pendingRecheck = 2 * time.Second

// TestRecoveryKeepsDisabled: an entry recorded with reconciliation disabled is never
// tombstoned. cm-d is someone else's — created by hand, and emitted by the first incarnation
// with eno.azure.io/disable-reconciliation: "true", so Eno leaves it alone. The history records
// that annotation (format 2); the Composition is deleted with orphan and recreated without cm-b
// and cm-d: Eno deletes cm-b, while cm-d, older than the history, gets no tombstone (reason
// Disabled) and is still there, untouched.
func TestRecoveryKeepsDisabled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		// No deletion guard in the way: without the rule, cm-d's tombstone would be handed over.
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "1"})
		byHand := s.createConfigMapByHand("cm-d", map[string]string{"owner": "by-hand"})
		synth := s.createOwnSynthesizer("disabled", nil, emitted{name: "cm-a"}, emitted{name: "cm-b"},
			emitted{name: "cm-d", annotations: map[string]string{disableAnnotation: "true"}})
		inc := incarnations{first: synth, recreated: "synth-one", deploys: []string{"cm-a", "cm-b", "cm-d"}}
		uids, _, uid := s.recordThenRecreateAs(inc, 1, func() {
			s.requireRecordedAnnotation(comp, "cm-d", disableAnnotation, "true")
		})
		if uids["cm-d"] != byHand.UID {
			t.Fatalf("ConfigMap cm-d: uid %s, want %s, the one created by hand", uids["cm-d"], byHand.UID)
		}

		first := s.waitFirstSynthesis(uid)
		d := s.waitDecision(uid, first, "Recovered")
		requireDroppedDisabled(t, d, "cm-d")
		s.checkNoTombstone(d.TombstoneSlice, "cm-d")
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")

		carried := s.waitReady(comp, first)
		requireNotRecovered(t, s.waitDecision(uid, carried.UUID, "NothingToRecover"))
		s.requireNotDeletedByEno("cm-d")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"], "cm-d": byHand.UID})
		s.requireData("cm-d", "owner", "by-hand")
	})
}

// TestRecoveryKeepsMigratedResource follows Eno's resource migration between Compositions
// (Eno's docs/resource-migration.md): both synthesizers emit cm-m with an override that
// disables its reconciliation unless the Composition carries migration/resource-owner: "true".
// The migration's step 3 is done: target owns cm-m, and web, the source, carries the
// annotation empty, so its cm-m is disabled. web is recorded (cm-m with its overrides), deleted
// with orphan, and recreated without cm-m (step 4) and without the migration annotation (step
// 5), alongside a normal orphan cm-b. There the override's condition no longer evaluates, so a
// tombstone of cm-m would delete the object target owns: it gets none (reason Disabled), Eno
// deletes only cm-b, and target still manages cm-m, which keeps its UID.
func TestRecoveryKeepsMigratedResource(t *testing.T) {
	const (
		ownerAnnotation = "migration/resource-owner"
		target          = "target"
	)
	overrides := `[{"path": "self.metadata.annotations[\"` + disableAnnotation + `\"]", "value": "true", ` +
		`"condition": "composition.metadata.annotations['` + ownerAnnotation + `'] != 'true'"}]`
	migrated := func(version string) emitted {
		return emitted{name: "cm-m", annotations: map[string]string{overridesAnnotation: overrides}, data: map[string]string{"version": version}}
	}
	forEachMode(t, func(t *testing.T, m mode) {
		// No deletion guard in the way: without the rule, cm-m's tombstone would be handed over.
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "1"})
		targetV1 := s.createOwnSynthesizer("target-v1", nil, migrated("1"))
		targetV2 := s.createOwnSynthesizer("target-v2", nil, migrated("2"))
		source := s.createOwnSynthesizer("source", nil, emitted{name: "cm-a"}, emitted{name: "cm-b"}, migrated("1"))

		s.createComposition(target, targetV1, map[string]string{ownerAnnotation: "true"})
		owned := s.waitConfigMaps("cm-m")["cm-m"]
		targetSynthesis := s.waitReady(target, "")

		inc := incarnations{first: source, recreated: "synth-one", deploys: []string{"cm-a", "cm-b", "cm-m"},
			firstAnnotations: map[string]string{ownerAnnotation: ""}}
		uids, _, uid := s.recordThenRecreateAs(inc, 1, func() {
			s.requireRecordedAnnotation(comp, "cm-m", overridesAnnotation, overrides)
		})
		if uids["cm-m"] != owned {
			t.Fatalf("ConfigMap cm-m: uid %s, want %s, the one target created", uids["cm-m"], owned)
		}

		first := s.waitFirstSynthesis(uid)
		d := s.waitDecision(uid, first, "Recovered")
		requireDroppedDisabled(t, d, "cm-m")
		s.checkNoTombstone(d.TombstoneSlice, "cm-m")
		s.waitConfigMapGone("cm-b")
		s.requireDeletedByEno("cm-b")

		carried := s.waitReady(comp, first)
		requireNotRecovered(t, s.waitDecision(uid, carried.UUID, "NothingToRecover"))
		s.requireNotDeletedByEno("cm-m")
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"], "cm-m": owned})

		// target still manages cm-m: its next synthesis reaches the same object.
		s.setSynthesizer(target, targetV2)
		s.waitReady(target, targetSynthesis.UUID)
		s.waitFor("cm-m updated by target's new synthesis", waitLong, func(ctx context.Context) error {
			cm, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Get(ctx, "cm-m", metav1.GetOptions{})
			switch {
			case err != nil:
				return err
			case cm.UID != owned:
				return fmt.Errorf("uid %s, want %s", cm.UID, owned)
			case cm.Data["version"] != "2":
				return fmt.Errorf("data %v, want version 2", cm.Data)
			}
			return nil
		})
	})
}

// TestRecreatedObjectSurvivesRestart: a tombstone checks itself on Eno's live read, so one
// whose object was re-created (another UID) after the hand-off is skipped by an eno-reconciler
// that loads the synthesis later. The recreated
// Composition's forced resynthesis fails (its synthesizer's gate closes behind the first
// synthesis), so the recovery slice stays pending with the tombstones of cm-b and cm-c. cm-b
// is deleted and created again by hand; nothing rewrites its tombstone. eno-reconciler is restarted and
// loads the synthesis with the slice: it deletes cm-c, which proves it loaded the slice, and
// leaves the re-created cm-b. Once the synthesizer succeeds again, Eno converges on a new
// synthesis without deleting it.
func TestRecreatedObjectSurvivesRestart(t *testing.T) {
	forEachMode(t, func(t *testing.T, m mode) {
		// Two of three resources are tombstoned, over the default deletion guard of 0.5.
		s := newScenario(t, m, settings{recovery: true, maxTombstoneFraction: "1", pendingRecheckInterval: pendingRecheck})
		three := s.createOwnSynthesizer("three", nil, emitted{name: "cm-a"}, emitted{name: "cm-b"}, emitted{name: "cm-c"})
		g := s.newGate("one")
		one := s.createOwnSynthesizer("one", g, emitted{name: "cm-a"})
		inc := incarnations{first: three, recreated: one, deploys: []string{"cm-a", "cm-b", "cm-c"}}
		uids, recreatedAt, uid := s.recordThenRecreateAs(inc, 1, g.arm)

		first := s.waitFirstSynthesis(uid)
		d := s.waitDecision(uid, first, "Recovered")
		if d.Tombstones != 2 || d.TombstoneSlice == "" {
			t.Fatalf("decision %+v, want 2 tombstones in a named slice", d)
		}
		s.waitFor("the forced resynthesis fails in the executor", waitLong, func(context.Context) error {
			for _, run := range standIn.runsFor(s.ns, comp, recreatedAt) {
				if run.SynthesisUUID != first && run.Err != nil {
					return nil
				}
			}
			return fmt.Errorf("executor runs since the recreation: %v", s.syntheses(comp, recreatedAt))
		})
		// Pending: no synthesis carried the tombstones, and the running eno-reconciler has not
		// loaded the slice appended to the synthesis it already had.
		s.requireCurrent(first)
		s.requireUnchanged(map[string]types.UID{"cm-b": uids["cm-b"], "cm-c": uids["cm-c"]})
		before := s.mustReadSlice(d.TombstoneSlice)
		at := before.index("cm-b")
		if at < 0 || before.resources[at].withdrawn() || before.index("cm-c") < 0 {
			t.Fatalf("recovery slice %s: %+v, want pending tombstones of cm-b and cm-c", d.TombstoneSlice, before.resources)
		}

		// cm-b is deleted and created again by hand: no longer the object the history recorded.
		// Both times are whole seconds and the same second counts as older, so the re-creation
		// waits for the next second (this host's clock is the API server's).
		written, err := time.Parse(time.RFC3339, before.annotations[historyWrittenAnnotation])
		if err != nil {
			t.Fatalf("recovery slice %s: %s: %v", d.TombstoneSlice, historyWrittenAnnotation, err)
		}
		s.waitFor("the clock past the second the history was written", time.Minute, func(context.Context) error {
			if now := time.Now().Truncate(time.Second); !now.After(written) {
				return fmt.Errorf("now %s, history written %s", now.UTC().Format(time.RFC3339), written.UTC().Format(time.RFC3339))
			}
			return nil
		})
		if err := admin.Kube.CoreV1().ConfigMaps(s.ns).Delete(s.ctx(), "cm-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		again := s.createConfigMapByHand("cm-b", map[string]string{"owner": "by-hand"})
		if !again.CreationTimestamp.After(written) {
			t.Fatalf("re-created cm-b at %s, history written %s: want it newer", again.CreationTimestamp.UTC().Format(time.RFC3339), written.UTC().Format(time.RFC3339))
		}

		// Nothing is rewritten: the tombstone of cm-b checks itself when Eno acts (design §6.2).
		if sl := s.mustReadSlice(d.TombstoneSlice); sl.resources[at].withdrawn() {
			t.Fatalf("tombstone of cm-b rewritten: %+v", sl.resources[at])
		}

		// The restarted eno-reconciler loads the synthesis with the recovery slice.
		s.requireUnchanged(map[string]types.UID{"cm-c": uids["cm-c"]})
		s.restartReconciler()
		s.waitConfigMapGone("cm-c")
		s.requireDeletedByEno("cm-c")
		s.waitFor("both tombstones reconciled by the restarted eno-reconciler", waitLong, func(ctx context.Context) error {
			sl, err := s.readSlice(ctx, d.TombstoneSlice)
			if err != nil {
				return err
			}
			for _, r := range sl.resources {
				if !r.Reconciled {
					return fmt.Errorf("tombstone of %s not reconciled yet", r.Name)
				}
			}
			return nil
		})
		s.holdsFor("the re-created cm-b survives the restarted eno-reconciler", observeFor, func(ctx context.Context) error {
			if got, err := s.configMapUID(ctx, "cm-b"); err != nil || got != again.UID {
				return fmt.Errorf("ConfigMap cm-b: uid %q (%v), want %q, the one re-created by hand", got, err, again.UID)
			}
			return nil
		})
		s.requireNotDeletedByEno("cm-b")
		s.requireCurrent(first)

		// The synthesizer succeeds again: Eno's retry carries the hand-off on, and nothing more is deleted.
		g.open()
		carried := s.waitReady(comp, first)
		requireNotRecovered(t, s.waitDecision(uid, carried.UUID, "NothingToRecover"))
		s.waitRecorded(comp, uid, carried.UUID, 1)
		s.requireUnchanged(map[string]types.UID{"cm-a": uids["cm-a"], "cm-b": again.UID})
		s.requireNotDeletedByEno("cm-b")
		s.requireData("cm-b", "owner", "by-hand")
	})
}

// requireDroppedDisabled checks that a Recovered decision tombstones one resource and says it
// dropped the named one as Disabled. It lets the test go on to what Eno then does.
func requireDroppedDisabled(t *testing.T, d decision, configMap string) {
	t.Helper()
	t.Logf("decision: %s: %s", d.Outcome, d.Message)
	if d.TombstoneSlice == "" {
		t.Fatalf("decision %+v names no recovery slice", d)
	}
	if d.Tombstones != 1 || !strings.Contains(d.Message, "1 Disabled (first ") || !strings.Contains(d.Message, configMap) {
		t.Errorf("decision %+v, want 1 tombstone and %s dropped as Disabled in the message", d, configMap)
	}
}

// --- the scenario's own Synthesizers ---

// emitted is a ConfigMap a scenario's own Synthesizer emits into the scenario's namespace, or
// a Namespace of that name.
type emitted struct {
	name        string
	labels      map[string]string
	annotations map[string]string
	data        map[string]string // default: synthesizer=<the Synthesizer's name>; empty: none
	namespace   bool              // a Namespace, with no data
}

// createOwnSynthesizer creates a Synthesizer for this scenario alone, named <namespace>-<name>,
// and returns its name. Its command is a shell script that ignores its input and prints a
// ResourceList of the ConfigMaps, written to a file next to it; with a gate, it passes the gate
// first. It is deleted when the test ends.
func (s *scenario) createOwnSynthesizer(name string, g *gate, configMaps ...emitted) string {
	s.t.Helper()
	name = s.ns + "-" + name
	items := make([]any, len(configMaps))
	for i, cm := range configMaps {
		meta, item := map[string]any{"name": cm.name, "namespace": s.ns}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
		if len(cm.labels) > 0 {
			meta["labels"] = cm.labels
		}
		if len(cm.annotations) > 0 {
			meta["annotations"] = cm.annotations
		}
		if data := cm.data; data == nil {
			item["data"] = map[string]string{"synthesizer": name}
		} else if len(data) > 0 {
			item["data"] = data
		}
		if cm.namespace {
			delete(meta, "namespace")
			item = map[string]any{"apiVersion": "v1", "kind": "Namespace"}
		}
		item["metadata"] = meta
		items[i] = item
	}
	out, err := json.Marshal(map[string]any{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items})
	if err != nil {
		s.t.Fatal(err)
	}
	output := filepath.Join(s.dir, name+".json")
	script := "#!/bin/sh\n# " + name + ": a KRM function printing " + output + ".\ncat >/dev/null\n"
	if g != nil {
		script += g.shell()
	}
	script += "exec cat " + shellQuote(output) + "\n"
	path := filepath.Join(s.dir, name+".sh")
	if err := os.WriteFile(output, append(out, '\n'), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		s.t.Fatal(err)
	}
	syn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eno.azure.io/v1",
		"kind":       "Synthesizer",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"image": synthImage, "command": []any{path}},
	}}
	client := admin.Dynamic.Resource(synthesizerResource)
	if _, err := client.Create(s.ctx(), syn, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("creating Synthesizer %s: %v", name, err)
	}
	s.t.Cleanup(func() {
		if err := client.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			s.t.Errorf("deleting Synthesizer %s: %v", name, err)
		}
	})
	return name
}

// gate makes a Synthesizer fail on demand, as a broken synthesizer would: while it is closed the
// script exits 1 before printing anything. Armed, it lets one synthesis through and closes
// behind it, so a test need not race Eno to close it between two syntheses.
type gate struct {
	t             *testing.T
	closed, armed string
}

func (s *scenario) newGate(name string) *gate {
	return &gate{t: s.t, closed: filepath.Join(s.dir, name+".closed"), armed: filepath.Join(s.dir, name+".armed")}
}

func (g *gate) shell() string {
	return fmt.Sprintf("if [ -e %[1]s ]; then echo 'synthesizer failing: gate closed' >&2; exit 1; fi\n"+
		"if [ -e %[2]s ]; then mv -f %[2]s %[1]s; fi\n", shellQuote(g.closed), shellQuote(g.armed))
}

// arm lets the next synthesis through and closes the gate behind it.
func (g *gate) arm() {
	if err := os.WriteFile(g.armed, nil, 0o644); err != nil {
		g.t.Fatal(err)
	}
}

// open lets every synthesis through.
func (g *gate) open() {
	for _, path := range []string{g.armed, g.closed} {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			g.t.Fatal(err)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// --- downstream objects ---

// createConfigMapByHand creates a ConfigMap in the scenario's namespace, as someone other than
// Eno would.
func (s *scenario) createConfigMapByHand(name string, data map[string]string) *corev1.ConfigMap {
	s.t.Helper()
	cm, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Create(s.ctx(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("creating ConfigMap %s/%s: %v", s.ns, name, err)
	}
	return cm
}

// requireData asserts that the ConfigMap's data holds key=value.
func (s *scenario) requireData(name, key, value string) {
	s.t.Helper()
	cm, err := admin.Kube.CoreV1().ConfigMaps(s.ns).Get(s.ctx(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	if cm.Data[key] != value {
		s.t.Fatalf("ConfigMap %s/%s: data %v, want %s=%s", s.ns, name, cm.Data, key, value)
	}
}

// requireCurrent asserts that the Composition is still on synthesis uuid.
func (s *scenario) requireCurrent(uuid string) {
	s.t.Helper()
	u, err := s.getComposition(s.ctx(), comp)
	if err != nil {
		s.t.Fatal(err)
	}
	if syn := currentSynthesis(u); syn.UUID != uuid {
		s.t.Fatalf("current synthesis %+v, want still %s", syn, uuid)
	}
}

// findWarning returns nil once a Warning event with the reason about the incarnation uid
// mentions text.
func (s *scenario) findWarning(ctx context.Context, uid types.UID, reason, text string) error {
	events, err := admin.Kube.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		return err
	}
	var seen []string
	for _, e := range events.Items {
		if e.InvolvedObject.UID != uid {
			continue
		}
		if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text) {
			s.t.Logf("%s event: %s", reason, e.Message)
			return nil
		}
		seen = append(seen, e.Type+": "+e.Message)
	}
	return fmt.Errorf("%s events of %s so far: %q", reason, uid, seen)
}

// --- inventory and slices ---

// requireRecordedAnnotation asserts that chunk 0 of the Composition's history is in format 2
// and records the ConfigMap with the annotation key=value.
func (s *scenario) requireRecordedAnnotation(comp, configMap, key, value string) {
	s.t.Helper()
	secret, err := admin.Kube.CoreV1().Secrets(inventoryNamespace).Get(s.ctx(), s.chunkName(comp, 0), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	if f := secret.Annotations[inventoryFormatAnnotation]; f != inventoryFormat {
		s.t.Fatalf("Secret %s: %s=%q, want %q", secret.Name, inventoryFormatAnnotation, f, inventoryFormat)
	}
	var entries []struct {
		Kind        string            `json:"kind"`
		Namespace   string            `json:"namespace"`
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(secret.Data["inventory.json"], &entries); err != nil {
		s.t.Fatalf("Secret %s: %v", secret.Name, err)
	}
	for _, e := range entries {
		if e.Kind == "ConfigMap" && e.Namespace == s.ns && e.Name == configMap {
			if got, ok := e.Annotations[key]; !ok || got != value {
				s.t.Fatalf("inventory entry of %s: annotations %v, want %s=%s", configMap, e.Annotations, key, value)
			}
			return
		}
	}
	s.t.Fatalf("Secret %s records no ConfigMap %s: %+v", secret.Name, configMap, entries)
}

// sliceResource is one resource of a ResourceSlice, with its state from the slice's status.
type sliceResource struct {
	Kind, Namespace, Name string
	Deleted               bool
	Annotations           map[string]string
	Reconciled            bool
}

// withdrawn reports whether Eno skips the resource: reconciliation disabled, and no override
// that may enable it (a self-checking tombstone has one).
func (r sliceResource) withdrawn() bool {
	return r.Annotations[disableAnnotation] == "true" && r.Annotations[overridesAnnotation] == ""
}

// slice is a ResourceSlice as the scenarios read it.
type slice struct {
	annotations map[string]string
	resources   []sliceResource
}

// index returns the position of the ConfigMap in the slice, -1 if it holds none.
func (sl slice) index(configMap string) int {
	return slices.IndexFunc(sl.resources, func(r sliceResource) bool { return r.Kind == "ConfigMap" && r.Name == configMap })
}

func (sl slice) at(i int) sliceResource {
	if i < 0 || i >= len(sl.resources) {
		return sliceResource{}
	}
	return sl.resources[i]
}

// readSlice reads a ResourceSlice of the scenario's namespace.
func (s *scenario) readSlice(ctx context.Context, name string) (slice, error) {
	u, err := admin.Dynamic.Resource(kubetest.ResourceSliceResource).Namespace(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return slice{}, fmt.Errorf("reading ResourceSlice %s: %w", name, err)
	}
	sl := slice{annotations: u.GetAnnotations()}
	resources, _, _ := unstructured.NestedSlice(u.Object, "spec", "resources")
	states, _, _ := unstructured.NestedSlice(u.Object, "status", "resources")
	for i, r := range resources {
		m, _ := r.(map[string]any)
		manifest, _ := m["manifest"].(string)
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name        string            `json:"name"`
				Namespace   string            `json:"namespace"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(manifest), &obj); err != nil {
			return slice{}, fmt.Errorf("ResourceSlice %s, resource %d: %w", name, i, err)
		}
		res := sliceResource{Kind: obj.Kind, Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name,
			Annotations: obj.Metadata.Annotations}
		res.Deleted, _ = m["deleted"].(bool)
		if i < len(states) {
			state, _ := states[i].(map[string]any)
			res.Reconciled, _ = state["reconciled"].(bool)
		}
		sl.resources = append(sl.resources, res)
	}
	return sl, nil
}

// mustReadSlice is readSlice, failing the test if the slice cannot be read.
func (s *scenario) mustReadSlice(name string) slice {
	s.t.Helper()
	sl, err := s.readSlice(s.ctx(), name)
	if err != nil {
		s.t.Fatal(err)
	}
	return sl
}

// checkNoTombstone checks that the slice holds nothing of the ConfigMap, and lets the test go
// on to what Eno then does.
func (s *scenario) checkNoTombstone(sliceName, configMap string) {
	s.t.Helper()
	if sl := s.mustReadSlice(sliceName); sl.index(configMap) >= 0 {
		s.t.Errorf("recovery slice %s holds %s: %+v", sliceName, configMap, sl.resources)
	}
}
