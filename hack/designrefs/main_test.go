package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The references under test are assembled from pieces, so that this file holds none of the
// problems it describes and the check passes over it.
const (
	sign    = "§"
	word    = "design "
	old     = "S" + "PEC"
	beside  = ".." + "/shared"
	oldFile = "s" + "pec.md"
)

// designDoc is a design with sections 1, 6, 6.2 and 10, each with its anchor.
var designDoc = strings.Join([]string{
	"# the design",
	`<a id="s1"></a>`,
	"## 1. The problem",
	`See [` + sign + `10](#s10).`,
	`<a id="s6"></a>`,
	"## 6. Recovery",
	`<a id="s6.2"></a>`,
	"### 6.2 Handing tombstones over",
	`<a id="s10"></a>`,
	"## 10. Compatibility",
	"",
}, "\n")

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string // one substring per problem, in order; none means the files pass
	}{
		{name: "valid references in code, scripts and Markdown",
			files: map[string]string{
				"app/recover.go":   "// The hand-off (" + word + sign + "6.2 step 2), then " + word + sign + "1–" + sign + "6.\n",
				"app/wrapped.go":   "// across a line break (" + strings.TrimSpace(word) + "\n// " + sign + "10).\n",
				"deploy/rbac.yaml": "# " + word + sign + "6: reads only\n",
				"README.md":        "See [" + word + sign + "6.2](docs/design.md#s6.2) and [the design](docs/design.md).\n",
				"docs/other.md":    "Back to [" + sign + "10](design.md#s10) and [the README](../README.md).\n",
				".ci/run":          "make test-eno ENO_SRC=" + beside + "/third_party/eno.tar.gz\n",
				"domain/k8s.go":    "// stamp is the spec.synthesisUUID Eno wrote; SPECIFIC and Spec are fine.\n",
			}},
		{name: "a section the design does not have",
			files: map[string]string{"app/recover.go": "// as " + word + sign + "6.4 says\n"},
			want:  []string{"app/recover.go:1: " + word + sign + "6.4: docs/design.md has no such section"}},
		{name: "a missing section at the end of a range",
			files: map[string]string{"app/recover.go": "\n// " + word + sign + "6–" + sign + "7\n"},
			want:  []string{"app/recover.go:2: " + word + sign + "7: docs/design.md has no such section"}},
		{name: "a stale reference to the old specification",
			files: map[string]string{"domain/recovery.go": "// the order of " + old + " " + sign + "6\n"},
			want:  []string{"domain/recovery.go:1: cites \"" + old + "\""}},
		{name: "the old specification by file name, in any case",
			files: map[string]string{"notes.txt": "see " + oldFile + "\n"},
			want:  []string{"notes.txt:1: cites \"" + oldFile + "\""}},
		{name: "a path beside the checkout",
			files: map[string]string{"Makefile": "##   make test-eno ENO_SRC=" + beside + "/third_party/eno.tar.gz\n"},
			want:  []string{"Makefile:1: names " + beside + ", which is outside the repository"}},
		{name: "a Markdown link to a missing anchor",
			files: map[string]string{"README.md": "[design](docs/design.md#s4)\n"},
			want:  []string{`README.md:1: links to docs/design.md#s4: docs/design.md has no anchor "s4"`}},
		{name: "a Markdown link whose text and anchor disagree",
			files: map[string]string{"README.md": "[" + sign + "6](docs/design.md#s6.2)\n"},
			want:  []string{"README.md:1: the link text says §6 but the link goes to #s6.2"}},
		{name: "a Markdown link to the design from the wrong directory",
			files: map[string]string{"deploy/README.md": "[" + sign + "6](docs/design.md#s6)\n"},
			want:  []string{"deploy/README.md:1: links to docs/design.md#s6, which the repository does not have"}},
		{name: "a Markdown link outside the repository",
			files: map[string]string{"docs/notes.md": "[old](../../elsewhere/x.md)\n"},
			want:  []string{"docs/notes.md:1: links to ../../elsewhere/x.md, outside the repository"}},
		{name: "links in code blocks are not links",
			files: map[string]string{"README.md": "```\n[x](../../nowhere) " + sign + "\n```\n"}},
		{name: "a link to a heading of another Markdown file, and to one of its own",
			files: map[string]string{
				"ARCHITECTURE.md": "# Architecture\n## The `app` package: use cases\n## Glossary\n## Glossary\n<a id=\"kept\"></a>\n",
				"README.md": "[use cases](ARCHITECTURE.md#the-app-package-use-cases), [terms](ARCHITECTURE.md#glossary-1), " +
					"[kept](ARCHITECTURE.md#kept), [below](#flags), [line](Makefile#L3)\n## Flags\n",
				"Makefile": "all:\n",
			}},
		{name: "a link to a heading another Markdown file does not have",
			files: map[string]string{
				"ARCHITECTURE.md": "# Architecture\n## Glossary\n",
				"README.md":       "[terms](ARCHITECTURE.md#terms)\n",
			},
			want: []string{`README.md:1: links to ARCHITECTURE.md#terms: ARCHITECTURE.md has no heading or anchor "terms"`}},
		{name: "a link to a heading of its own file that is gone",
			files: map[string]string{"README.md": "## Running inside eno-reconciler\n[below](#wiring-into-eno-reconciler)\n"},
			want:  []string{`README.md:2: links to #wiring-into-eno-reconciler: README.md has no heading or anchor "wiring-into-eno-reconciler"`}},
		{name: "a heading in a code block is no anchor",
			files: map[string]string{"README.md": "```\n# Install\n```\n[install](#install)\n"},
			want:  []string{`README.md:4: links to #install: README.md has no heading or anchor "install"`}},
		{name: "a Markdown file over its budget",
			files: map[string]string{"BENCHMARKS.md": strings.Repeat("a figure\n", 201)},
			want:  []string{"BENCHMARKS.md:201: 201 lines, over its budget of 200"}},
		{name: "a Markdown file at its budget, its last line without a newline",
			files: map[string]string{"CONTRIBUTING.md": strings.Repeat("a step\n", 149) + "the last"}},
		{name: "the design over its budget",
			files: map[string]string{"docs/design.md": designDoc + strings.Repeat("a rule\n", 500-strings.Count(designDoc, "\n")+1)},
			want:  []string{"docs/design.md:501: 501 lines, over its budget of 500"}},
		{name: "a numbered section of the design without its anchor",
			files: map[string]string{"docs/design.md": designDoc + "## 11. More\n"},
			want:  []string{`docs/design.md:11: section 11 has no anchor <a id="s11"></a>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"docs/design.md": designDoc, "README.md": ""}
			for k, v := range tc.files {
				files[k] = v
			}
			got := check(files)
			require.Len(t, got, len(tc.want), "%v", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i].String(), w)
			}
		})
	}
}

// Every document a newcomer reads has a budget, README.md's being the smallest of the operator's.
func TestBudgets(t *testing.T) {
	assert.Equal(t, map[string]int{
		"README.md": 200, "CONTRIBUTING.md": 150, "ARCHITECTURE.md": 250, "BENCHMARKS.md": 200, "docs/design.md": 500,
	}, budgets)
}

func TestSlugOf(t *testing.T) {
	for text, want := range map[string]string{
		"Install":                                "install",
		"Approving or rejecting a held recovery": "approving-or-rejecting-a-held-recovery",
		"The `run` flags":                        "the-run-flags",
		"8.2 The guest inside eno-reconciler":    "82-the-guest-inside-eno-reconciler",
		"Inside eno-reconciler ([design §8.2](docs/design.md#s8.2))": "inside-eno-reconciler-design-82",
		"Limits: what < 1.30 leaves open":                            "limits-what--130-leaves-open",
	} {
		assert.Equal(t, want, slugOf(text), text)
	}
}

// make verify runs each documentation check: removing one from hack/verify.sh fails here.
func TestVerifyRunsTheDocumentationChecks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "verify.sh"))
	require.NoError(t, err)
	for _, want := range []string{
		"go run ./hack/designrefs",
		"go run ./hack/flagtable",
	} {
		assert.Contains(t, string(b), want)
	}
}

func TestCheckWithoutTheDesign(t *testing.T) {
	got := check(map[string]string{"README.md": ""})
	require.Len(t, got, 1)
	assert.Equal(t, "docs/design.md:0: the design document is missing", got[0].String())
}

// The repository itself passes: run from its root, as make verify does.
func TestRepositoryPasses(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	t.Chdir(root)
	if _, err := os.Stat(".git"); err != nil {
		t.Skip("not a git checkout")
	}
	var out bytes.Buffer
	assert.NoError(t, run(&out))
	assert.Empty(t, out.String())
}
