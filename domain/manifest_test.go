package domain_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Identity keys are read as Kubernetes' case-sensitive decoder reads them (design §4). A manifest
// that encoding/json's case-insensitive matching would read differently is Malformed.
func TestReadSynthesisCaseSensitiveIdentity(t *testing.T) {
	const cm = `"apiVersion":"v1","kind":"ConfigMap"`
	const patch = `"apiVersion":"eno.azure.io/v1","kind":"Patch","metadata":{"name":"p","namespace":"ns"}`
	malformed := []struct {
		name, manifest string
	}{
		{"Name after name", `{` + cm + `,"metadata":{"name":"a","Name":"b"}}`},
		{"Name before name", `{` + cm + `,"metadata":{"Name":"b","name":"a"}}`},
		{"only Name", `{` + cm + `,"metadata":{"Name":"b"}}`},
		{"NAME", `{` + cm + `,"metadata":{"name":"a","NAME":"b"}}`},
		{"nAmE", `{` + cm + `,"metadata":{"name":"a","nAmE":"b"}}`},
		{"Namespace", `{` + cm + `,"metadata":{"name":"a","namespace":"x","Namespace":"y"}}`},
		{"only Namespace", `{` + cm + `,"metadata":{"name":"a","Namespace":"y"}}`},
		{"namespace with a long s (U+017F folds to s)", `{` + cm + `,"metadata":{"name":"a","name\u017fpace":"y"}}`},
		{"Kind", `{"apiVersion":"v1","kind":"ConfigMap","Kind":"Secret","metadata":{"name":"a"}}`},
		{"kind with a Kelvin sign (U+212A folds to k)", `{"apiVersion":"v1","kind":"ConfigMap","` + "\u212a" + `ind":"Secret","metadata":{"name":"a"}}`},
		{"apiversion", `{"apiVersion":"v1","apiversion":"apps/v1","kind":"ConfigMap","metadata":{"name":"a"}}`},
		{"APIVERSION only", `{"APIVERSION":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`},
		{"Metadata", `{` + cm + `,"metadata":{"name":"a"},"Metadata":{"name":"b"}}`},
		{"Labels", `{` + cm + `,"metadata":{"name":"a","labels":{"app":"x"},"Labels":{"app":"y"}}}`},
		{"Annotations", `{` + cm + `,"metadata":{"name":"a","Annotations":{"eno.azure.io/deletion-group":"1"}}}`},
		{"an escaped case variant", `{` + cm + `,"metadata":{"name":"a","\u004eame":"b"}}`},
		{"duplicate name", `{` + cm + `,"metadata":{"name":"a","name":"b"}}`},
		{"duplicate name, one spelled with an escape", `{` + cm + `,"metadata":{"name":"a","na\u006de":"b"}}`},
		{"duplicate namespace", `{` + cm + `,"metadata":{"name":"a","namespace":"x","namespace":"y"}}`},
		{"duplicate kind", `{"apiVersion":"v1","kind":"ConfigMap","kind":"Secret","metadata":{"name":"a"}}`},
		{"duplicate apiVersion", `{"apiVersion":"v1","apiVersion":"apps/v1","kind":"ConfigMap","metadata":{"name":"a"}}`},
		{"duplicate metadata (encoding/json merges, Kubernetes replaces)", `{` + cm + `,"metadata":{"name":"a","namespace":"x"},"metadata":{"name":"a"}}`},
		{"duplicate labels", `{` + cm + `,"metadata":{"name":"a","labels":{"app":"x"},"labels":{"tier":"y"}}}`},
		{"Patch: patch.Kind", `{` + patch + `,"patch":{"apiVersion":"v1","kind":"ConfigMap","Kind":"Secret"}}`},
		{"Patch: patch.ApiVersion", `{` + patch + `,"patch":{"apiVersion":"v1","ApiVersion":"apps/v1","kind":"ConfigMap"}}`},
		{"Patch: duplicate patch.kind", `{` + patch + `,"patch":{"apiVersion":"v1","kind":"ConfigMap","kind":"Secret"}}`},
		{"Patch: a Patch key next to patch", `{` + patch + `,"patch":{"apiVersion":"v1","kind":"ConfigMap"},"Patch":{"apiVersion":"v1","kind":"Secret"}}`},
		{"Patch: only a Patch key", `{` + patch + `,"Patch":{"apiVersion":"v1","kind":"Secret"}}`},
		{"Patch: duplicate patch", `{` + patch + `,"patch":{"apiVersion":"v1","kind":"ConfigMap"},"patch":{"apiVersion":"v1","kind":"Secret"}}`},
		{"labels not an object", `{` + cm + `,"metadata":{"name":"a","labels":["x"]}}`},
		{"label value not a string", `{` + cm + `,"metadata":{"name":"a","labels":{"app":1}}}`},
		{"other annotation value not a string", `{` + cm + `,"metadata":{"name":"a","annotations":{"note":{}}}}`},
		{"metadata not an object", `{` + cm + `,"metadata":"a"}`},
		{"kind not a string", `{"apiVersion":"v1","kind":["ConfigMap"],"metadata":{"name":"a"}}`},
		{"trailing garbage", `{` + cm + `,"metadata":{"name":"a"}} x`},
		{"two objects", `{` + cm + `,"metadata":{"name":"a"}}{}`},
	}
	for _, tt := range malformed {
		t.Run(tt.name, func(t *testing.T) {
			c := composition()
			_, err := domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice, domain.SliceResource{Manifest: tt.manifest})})
			var se *domain.SliceError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, domain.SliceMalformed, se.Problem, "%v", err)
			// The same holds for a tombstone: its identity decides what is covered.
			_, err = domain.ReadSynthesis(c, []domain.ResourceSlice{slice(goldenSlice, domain.SliceResource{Manifest: tt.manifest, Deleted: true})})
			require.ErrorAs(t, err, &se)
			assert.Equal(t, domain.SliceMalformed, se.Problem, "%v", err)
		})
	}

	accepted := []struct {
		name, manifest string
		want           domain.Entry
	}{
		{"an exact key spelled with escapes", `{"apiVersion":"v1","\u006bind":"ConfigMap","metadata":{"na\u006de":"a","namespace":"n\u0073"}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a"}},
		{"case variants outside the identity fields", `{` + cm + `,"Spec":{"Name":"x"},"spec":{"metadata":{"Name":"y","name":"z"}},"metadata":{"name":"a","Uid":"u","uid":"v"},"Status":{}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a"}},
		{"label keys are exact: case variants are distinct labels", `{` + cm + `,"metadata":{"name":"a","labels":{"App":"x","app":"y"}}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a", Labels: map[string]string{"App": "x", "app": "y"}}},
		{"annotation keys are exact", `{` + cm + `,"metadata":{"name":"a","annotations":{"Eno.azure.io/deletion-group":"1","eno.azure.io\/readiness-group":"2"}}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a", Annotations: map[string]string{domain.AnnotationReadinessGroup: "2"}}},
		{"escaped label keys and values", `{` + cm + `,"metadata":{"name":"a","labels":{"a\u002fb":"c\"d","e":"\u00e9"}}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a", Labels: map[string]string{"a/b": `c"d`, "e": "é"}}},
		{"null fields read as absent", `{` + cm + `,"patch":null,"metadata":{"name":"a","namespace":null,"labels":null,"annotations":null}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a"}},
		{"a patch key on a resource that is not a Patch", `{` + cm + `,"metadata":{"name":"a"},"patch":1,"Patch":2}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a"}},
		{"whitespace everywhere", " {\n\t\"apiVersion\" : \"v1\" ,\r\n \"kind\":\"ConfigMap\", \"metadata\" : { \"name\" : \"a\" , \"labels\" : { \"x\" : \"y\" } } } ",
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a", Labels: map[string]string{"x": "y"}}},
		{"duplicate label keys keep the last, in both decoders", `{` + cm + `,"metadata":{"name":"a","labels":{"x":"1","x":"2"}}}`,
			domain.Entry{Version: "v1", Kind: "ConfigMap", Name: "a", Labels: map[string]string{"x": "2"}}},
	}
	for _, tt := range accepted {
		t.Run(tt.name, func(t *testing.T) {
			got := readSynthesis(t, tt.manifest)
			require.Equal(t, []domain.Entry{tt.want}, got.Inventory().Entries())
		})
	}

	t.Run("a Patch's target is read exactly", func(t *testing.T) {
		got := readSynthesis(t, `{`+patch+`,"spec":{"Kind":"x"},"patch":{"\u0061piVersion":"apps/v1","kind":"Deployment","ops":[]}}`)
		assert.True(t, got.Covers(domain.ResourceID{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "p"}))
		assert.Equal(t, 0, got.Inventory().Len())
	})
}

// Every case-variant manifest above is one that encoding/json reads differently from an
// exact-key reading: the cases are real, not hypothetical.
func TestCaseVariantsFoolEncodingJSON(t *testing.T) {
	for _, m := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","Name":"b"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","` + "\u212a" + `ind":"Secret","metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name\u017fpace":"y"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"x"},"metadata":{"name":"a"}}`,
	} {
		exact, ok := exactIdentity(m)
		require.True(t, ok)
		folded, ok := foldedIdentity(m)
		require.True(t, ok)
		assert.NotEqual(t, exact, folded, m)
	}
}

// exactIdentity reads a manifest as Kubernetes does: exact keys, the last of duplicates.
func exactIdentity(manifest string) (domain.ResourceID, bool) {
	var obj map[string]any
	if err := json.Unmarshal([]byte(manifest), &obj); err != nil {
		return domain.ResourceID{}, false
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	return domain.ResourceID{Group: groupOf(apiVersion), Kind: kind, Namespace: ns, Name: name}, true
}

// foldedIdentity reads a manifest with encoding/json's case-insensitive field matching.
func foldedIdentity(manifest string) (domain.ResourceID, bool) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(manifest), &m); err != nil {
		return domain.ResourceID{}, false
	}
	return domain.ResourceID{Group: groupOf(m.APIVersion), Kind: m.Kind, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}, true
}

func groupOf(apiVersion string) string {
	for i := len(apiVersion) - 1; i >= 0; i-- {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}
