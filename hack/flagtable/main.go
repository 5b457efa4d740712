// Command flagtable keeps README.md's table of the run flags equal to what the binary says.
// It builds cmd/tombstone-recovery, reads `tombstone-recovery run -h`, renders one row per flag
// (name, default, meaning) and compares the result with the lines of README.md between
// beginMarker and endMarker. make verify runs it; `make docs` runs it with -update, which
// rewrites those lines.
//
//	go run ./hack/flagtable [-update]
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

const (
	readmePath  = "README.md"
	beginMarker = "<!-- run -h: begin (make docs writes this table) -->"
	endMarker   = "<!-- run -h: end -->"
)

// flagInfo is one flag as `run -h` prints it. def is the flag package's default, a value;
// defText is a default the usage words itself, "(default: in-cluster, then $KUBECONFIG)".
type flagInfo struct {
	name, typ, def, defText, usage string
}

var (
	// goDefault is the suffix the flag package appends to a usage for a non-zero default.
	goDefault = regexp.MustCompile(` \(default (.+)\)$`)
	// wordedDefault is a default the usage text gives in words, at its end.
	wordedDefault = regexp.MustCompile(` \(default: ([^()]+)\)$`)
)

// parseHelp reads the flag package's PrintDefaults output: a line "  -name type" (a one-letter
// name may have its usage after a tab on the same line), then usage lines indented by
// "    \t". Lines before the first flag (the usage line) are skipped.
func parseHelp(help string) ([]flagInfo, error) {
	var out []flagInfo
	sc := bufio.NewScanner(strings.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  -"):
			head, usage, _ := strings.Cut(strings.TrimPrefix(line, "  -"), "\t")
			name, typ, _ := strings.Cut(strings.TrimSpace(head), " ")
			out = append(out, flagInfo{name: name, typ: typ, usage: strings.TrimSpace(usage)})
		case strings.HasPrefix(line, "    \t") && len(out) > 0:
			f := &out[len(out)-1]
			f.usage = strings.TrimSpace(f.usage + " " + strings.TrimPrefix(line, "    \t"))
		case len(out) > 0 && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("unexpected line in the help: %q", line)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the help lists no flags")
	}
	for i := range out {
		if m := goDefault.FindStringSubmatchIndex(out[i].usage); m != nil {
			out[i].def = strings.Trim(out[i].usage[m[2]:m[3]], `"`)
			out[i].usage = out[i].usage[:m[0]]
		}
		if m := wordedDefault.FindStringSubmatchIndex(out[i].usage); m != nil && out[i].def == "" {
			out[i].defText = out[i].usage[m[2]:m[3]]
			out[i].usage = out[i].usage[:m[0]]
		}
	}
	return out, nil
}

// renderTable is the Markdown table of the flags, in the order the help prints them: a value
// default in code font, a worded one as it is.
func renderTable(flags []flagInfo) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	for _, f := range flags {
		name := "`--" + f.name
		if f.typ != "" {
			name += " " + f.typ
		}
		name += "`"
		if len(f.name) == 1 {
			name = strings.Replace(name, "--", "-", 1)
		}
		def := f.defText
		if f.def != "" {
			def = "`" + f.def + "`"
		}
		b.WriteString("| " + name + " | " + def + " | " + strings.ReplaceAll(f.usage, "|", `\|`) + " |\n")
	}
	return b.String()
}

// block returns the lines between the markers and where they start and end in readme.
func block(readme string) (body string, start, end int, err error) {
	b := strings.Index(readme, beginMarker+"\n")
	e := strings.Index(readme, endMarker)
	if b < 0 || e < 0 || e < b {
		return "", 0, 0, fmt.Errorf("%s has no table between %q and %q", readmePath, beginMarker, endMarker)
	}
	start = b + len(beginMarker) + 1
	return readme[start:e], start, e, nil
}

// compare returns readme with the generated table in place, and an error describing the first
// difference when the table there is not table.
func compare(readme, table string) (string, error) {
	body, start, end, err := block(readme)
	if err != nil {
		return "", err
	}
	updated := readme[:start] + table + readme[end:]
	if body == table {
		return updated, nil
	}
	have, want := strings.Split(body, "\n"), strings.Split(table, "\n")
	for i := 0; i < len(have) || i < len(want); i++ {
		var h, w string
		if i < len(have) {
			h = have[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if h != w {
			return updated, fmt.Errorf("%s's flag table differs from `tombstone-recovery run -h` at its row %d:\n  README: %s\n  run -h: %s\nrun 'make docs' to rewrite it", readmePath, i+1, h, w)
		}
	}
	return updated, nil
}

func runHelp() (string, error) {
	cmd := exec.Command("go", "run", "./cmd/tombstone-recovery", "run", "-h")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tombstone-recovery run -h: %w\n%s", err, out)
	}
	return string(out), nil
}

func run(update bool) error {
	help, err := runHelp()
	if err != nil {
		return err
	}
	flags, err := parseHelp(help)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	updated, err := compare(string(b), renderTable(flags))
	if err != nil && update && updated != "" {
		return os.WriteFile(readmePath, []byte(updated), 0o644)
	}
	return err
}

func main() {
	update := flag.Bool("update", false, "rewrite README.md's flag table from `run -h`")
	flag.Parse()
	if err := run(*update); err != nil {
		fmt.Fprintln(os.Stderr, "flagtable:", err)
		os.Exit(1)
	}
}
