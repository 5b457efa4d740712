package resilience_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// newMarker is a unique lowercase string that is valid in names and label values and appears
// nowhere unless the test put it there.
func newMarker(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "mk" + hex.EncodeToString(b)
}

// markerLabels is a label carrying marker: it enters the inventory.json of a chunk, and only
// that (tombstone manifests carry it too, but nothing logs manifests).
func markerLabels(marker string) map[string]string {
	return map[string]string{"resilience.example.com/marker": "v-" + marker}
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{16,}={0,2}`)

// leaks says how logs reveal Secret data: a chunk's inventory.json raw, JSON-escaped or in
// base64, the marker label value in any form, or any base64 run that decodes to the marker.
func leaks(logs string, marker string, chunks [][]byte) []string {
	var out []string
	for _, data := range chunks {
		escaped, _ := json.Marshal(string(data))
		for what, s := range map[string]string{
			"raw inventory.json":          string(data),
			"JSON-escaped inventory.json": strings.Trim(string(escaped), `"`),
			"base64 inventory.json":       base64.StdEncoding.EncodeToString(data),
		} {
			if strings.Contains(logs, s) {
				out = append(out, what+": "+truncate(s, 80))
			}
		}
	}
	if label := markerLabels(marker)["resilience.example.com/marker"]; strings.Contains(logs, label) {
		out = append(out, "the marker label value "+label)
	}
	for _, run := range base64Run.FindAllString(logs, -1) {
		for off := 0; off < 4 && off < len(run); off++ {
			s := strings.TrimRight(run[off:], "=")
			s = s[:len(s)/4*4]
			if decoded, err := base64.StdEncoding.DecodeString(s); err == nil && strings.Contains(string(decoded), marker) {
				out = append(out, "base64 that decodes to the marker: "+truncate(run, 80))
			}
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TestLeakScanFindsSecretData keeps the log scan honest: each way a chunk could leak is found.
func TestLeakScanFindsSecretData(t *testing.T) {
	marker := newMarker(t)
	chunk := []byte(`[{"version":"v1","kind":"ConfigMap","namespace":"workloads","name":"settings-` + marker + `","labels":{"resilience.example.com/marker":"v-` + marker + `"}}]`)
	escaped, _ := json.Marshal(string(chunk))
	at := strings.Index(string(chunk), marker)
	clean := `{"level":"info","msg":"recorded inventory snapshot","composition":"team-a/web","secret":"settings-` + marker + `"}`
	assert.Empty(t, leaks(clean, marker, [][]byte{chunk}), "identities (names) may be logged")
	for what, line := range map[string]string{
		"raw":             `{"msg":"x","data":` + string(chunk) + `}`,
		"escaped":         `{"msg":"x","data":` + string(escaped) + `}`,
		"base64":          `{"msg":"x","data":"` + base64.StdEncoding.EncodeToString(chunk) + `"}`,
		"base64 fragment": `{"msg":"x","data":"` + base64.StdEncoding.EncodeToString(chunk[at-5:at+len(marker)+3]) + `"}`,
		"label value":     `{"msg":"x","labels":{"k":"v-` + marker + `"}}`,
	} {
		assert.NotEmpty(t, leaks(clean+"\n"+line, marker, [][]byte{chunk}), what)
	}
}
