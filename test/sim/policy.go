package sim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
)

// admissionPolicy models what the release's admission policy on ResourceSlices
// (deploy/control-plane/release.yaml) lets the controller's identity write, read from the
// policy, not from the product: it creates only recovery slices that a Composition controls,
// with spec.synthesisUUID set, whose every resource is a tombstone that checks itself; it never
// updates or deletes a slice. Every other identity, and every other write, passes.
func admissionPolicy(r apiserver.Request) apiserver.Verdict {
	if r.Actor != controllerManager || r.Resource != "resourceslices" {
		return apiserver.Proceed
	}
	switch r.Verb {
	case "create":
		if admitsSlice(r.Body) {
			return apiserver.Proceed
		}
		return apiserver.Respond(http.StatusUnprocessableEntity)
	case "update", "patch", "delete":
		return apiserver.Respond(http.StatusUnprocessableEntity)
	}
	return apiserver.Proceed
}

type policySlice struct {
	Metadata struct {
		Name            string `json:"name"`
		OwnerReferences []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Controller bool   `json:"controller"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Spec struct {
		SynthesisUUID string `json:"synthesisUUID"`
		Resources     []struct {
			Manifest string `json:"manifest"`
			Deleted  bool   `json:"deleted"`
		} `json:"resources"`
	} `json:"spec"`
}

func admitsSlice(body []byte) bool {
	var s policySlice
	if json.Unmarshal(body, &s) != nil || !strings.Contains(s.Metadata.Name, "-recovery-") || s.Spec.SynthesisUUID == "" || len(s.Spec.Resources) == 0 {
		return false
	}
	controlled := false
	for _, o := range s.Metadata.OwnerReferences {
		controlled = controlled || o.Controller && o.Kind == "Composition" && strings.HasPrefix(o.APIVersion, "eno.azure.io/")
	}
	for _, r := range s.Spec.Resources {
		if !r.Deleted || !checksItself(r.Manifest) {
			return false
		}
	}
	return controlled
}

const pausePath = "self.metadata.annotations['eno.azure.io/disable-reconciliation']"

var (
	uidPin   = regexp.MustCompile(`^self\.metadata\.uid == "[\w:.-]{1,64}" && `)
	armedPin = regexp.MustCompile(` && composition\.metadata\.annotations\["eno\.azure\.io/tombstone-recovery-armed"\] == "[\w:.-]{1,64}"$`)
)

// checksItself: the manifest is paused ("true") and carries exactly the two overrides !(C) →
// "true" and C → "false", C pinning the object's UID first and the arming digest last.
func checksItself(manifest string) bool {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(manifest), &m) != nil || m.Metadata.Annotations["eno.azure.io/disable-reconciliation"] != "true" {
		return false
	}
	var ops []struct{ Path, Value, Condition string }
	if json.Unmarshal([]byte(m.Metadata.Annotations["eno.azure.io/overrides"]), &ops) != nil || len(ops) != 2 {
		return false
	}
	c := ops[1].Condition
	return ops[0].Path == pausePath && ops[1].Path == pausePath && ops[0].Value == "true" && ops[1].Value == "false" &&
		ops[0].Condition == "!("+c+")" && uidPin.MatchString(c) && armedPin.MatchString(c)
}
