package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// help is what the flag package prints for a FlagSet of each kind of flag.
const help = `usage: tombstone-recovery run [flags]
  -enabled
    	record and recover (default true)
  -kubeconfig string
    	kubeconfig of the control plane (default: in-cluster)
  -leader-elect
    	elect a leader
  -metrics-bind-address string
    	address of /metrics; 0 disables it (default ":8080")
  -resync-period duration
    	re-deliver every cached Composition this often (default 10m0s)
  -v int
    	log verbosity: a | b
`

const table = "| flag | default | meaning |\n|---|---|---|\n" +
	"| `--enabled` | `true` | record and recover |\n" +
	"| `--kubeconfig string` | in-cluster | kubeconfig of the control plane |\n" +
	"| `--leader-elect` |  | elect a leader |\n" +
	"| `--metrics-bind-address string` | `:8080` | address of /metrics; 0 disables it |\n" +
	"| `--resync-period duration` | `10m0s` | re-deliver every cached Composition this often |\n" +
	"| `-v int` |  | log verbosity: a \\| b |\n"

func TestRenderTable(t *testing.T) {
	flags, err := parseHelp(help)
	require.NoError(t, err)
	assert.Equal(t, table, renderTable(flags))
}

func TestParseHelpRefusesWhatItCannotRead(t *testing.T) {
	_, err := parseHelp("usage: tombstone-recovery run [flags]\n")
	assert.ErrorContains(t, err, "lists no flags")
	_, err = parseHelp(help + "something else\n")
	assert.ErrorContains(t, err, `unexpected line in the help: "something else"`)
}

func readme(body string) string {
	return "# title\n\n" + beginMarker + "\n" + body + endMarker + "\n\nmore\n"
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name, readme, want string // want: a substring of the error; "" means equal
	}{
		{name: "equal", readme: readme(table)},
		{name: "a flag missing from the README",
			readme: readme(strings.Replace(table, "| `--resync-period duration` | `10m0s` | re-deliver every cached Composition this often |\n", "", 1)),
			want:   "at its row 7:\n  README: | `-v int` |  | log verbosity: a \\| b |\n  run -h: | `--resync-period duration` |"},
		{name: "a flag the binary does not have",
			readme: readme(table + "| `--composition-selector string` |  | shard |\n"),
			want:   "at its row 9:\n  README: | `--composition-selector string` |  | shard |\n  run -h: "},
		{name: "another default",
			readme: readme(strings.Replace(table, "`:8080`", "`:9090`", 1)),
			want:   "at its row 6"},
		{name: "no markers", readme: "# title\n" + table, want: "has no table between"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated, err := compare(tc.readme, table)
			if tc.want == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.readme, updated)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if updated != "" {
				assert.Equal(t, readme(table), updated, "the update puts the generated table between the markers")
			}
		})
	}
}

// The repository's README matches its binary: run from the root, as make verify does.
func TestRepositoryPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	t.Chdir(root)
	if _, err := os.Stat(readmePath); err != nil {
		t.Skip("no README.md")
	}
	assert.NoError(t, run(false))
}
