// Command designrefs checks that the repository's references to its design resolve inside the
// repository. In every tracked file:
//
//   - "design §6.2" (and a range or list after it, "design §5–§6") names a numbered section of
//     docs/design.md;
//   - a Markdown link into the design, "[design §6.2](docs/design.md#s6.2)", reaches
//     docs/design.md from where it stands and names an anchor the design has, and a link whose
//     text is a section sign names that section's anchor;
//   - a relative Markdown link stays inside the repository and reaches a tracked file, and a
//     fragment on a link to a Markdown file ("#install", "ARCHITECTURE.md#glossary") names a
//     heading (GitHub's slug of it) or an <a id> anchor of that file;
//   - each Markdown file with a budget (budgets) has at most that many lines;
//   - README.md's runbook names every outcome and reason the domain declares (runbook.go);
//   - every Go name and path ARCHITECTURE.md cites in backquotes exists (names.go);
//   - nothing cites the specification the design replaced, or a path beside the checkout that a
//     clone does not have. CI's entry point (.ci/run) alone may name the pinned Eno tarball that
//     sits beside CI's checkout.
//
// It reads the files `git ls-files` lists and prints one line per problem.
//
//	go run ./hack/designrefs
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// designPath is the design document, relative to the repository root.
const designPath = "docs/design.md"

// budgets is the most lines each document may have: a newcomer reads all of them in twenty
// minutes. A file over its budget is a problem; shorten it rather than raise the number.
var budgets = map[string]int{
	"README.md":       200,
	"CONTRIBUTING.md": 150,
	"ARCHITECTURE.md": 250,
	"BENCHMARKS.md":   200,
	designPath:        500,
}

// ciEntryPoint may name the tarball beside CI's checkout.
const ciEntryPoint = ".ci/run"

var (
	// outside is a path to the directory beside the checkout, where only CI keeps anything.
	outside = ".." + "/shared"
	// staleRef is a citation of the specification the design replaced: its upper-case name, or
	// the word in any case before a section sign or as a Markdown file name. The lower-case word
	// alone is Kubernetes' spec field.
	staleRef = regexp.MustCompile(`\bS[P]EC\b|(?i:\bs[p]ec(?:\.md\b|\s*§))`)
	// designRef is "design §N" with any following "–§M", "/§M" or ", §M"; a comment marker may
	// sit between the word and the sign where a line wraps.
	designRef = regexp.MustCompile(`\bdesign(?:\s|//|#)*§(\d+(?:\.\d+)*)((?:\s*(?:[–/-]|,)\s*§\d+(?:\.\d+)*)*)`)
	section   = regexp.MustCompile(`§(\d+(?:\.\d+)*)`)
	// mdLink is a Markdown inline link: its text and its target.
	mdLink = regexp.MustCompile(`\[([^\]\n]*)\]\(([^)\s]+)\)`)
	// heading is a numbered heading of the design: "## 6. Recovery", "### 6.2 Handing …".
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s`)
	// anyHeading is any ATX heading of a Markdown file, for its GitHub slug.
	anyHeading = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)
	anchor     = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	htmlTag    = regexp.MustCompile(`<[^>]*>`)
	fence      = regexp.MustCompile("(?ms)^```.*?^```")
)

// design is what references may name: the numbered sections and the anchors of the document.
type design struct {
	sections map[string]int // the heading's offset
	anchors  map[string]bool
}

func parseDesign(text string) design {
	d := design{sections: map[string]int{}, anchors: map[string]bool{}}
	for _, m := range heading.FindAllStringSubmatchIndex(text, -1) {
		d.sections[text[m[2]:m[3]]] = m[0]
	}
	for _, m := range anchor.FindAllStringSubmatch(text, -1) {
		d.anchors[m[1]] = true
	}
	return d
}

// problem is one finding, printed as "file:line: message".
type problem struct {
	file string
	line int
	msg  string
}

func (p problem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.msg) }

// check judges files (path → content, paths relative to the repository root) and returns every
// problem, sorted by file and line.
func check(files map[string]string) []problem {
	text, ok := files[designPath]
	if !ok {
		return []problem{{designPath, 0, "the design document is missing"}}
	}
	d := parseDesign(text)
	var out []problem
	for s, at := range d.sections {
		if !d.anchors["s"+s] {
			out = append(out, problem{designPath, lineOf(text, at), fmt.Sprintf("section %s has no anchor <a id=\"s%s\"></a>", s, s)})
		}
	}
	have := map[string]bool{}
	anchors := map[string]map[string]bool{}
	for name, content := range files {
		for p := name; p != "."; p = path.Dir(p) {
			have[p] = true
		}
		if strings.HasSuffix(name, ".md") {
			anchors[name] = markdownAnchors(content)
		}
	}
	for name, content := range files {
		out = append(out, checkFile(name, content, d, have, anchors)...)
	}
	out = append(out, checkRunbook(files)...)
	out = append(out, checkCitedNames(files, have)...)
	for name, max := range budgets {
		content, ok := files[name]
		if !ok {
			continue
		}
		if n := lineCount(content); n > max {
			out = append(out, problem{name, max + 1, fmt.Sprintf("%d lines, over its budget of %d", n, max)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out
}

func checkFile(name, content string, d design, have map[string]bool, anchors map[string]map[string]bool) []problem {
	var out []problem
	add := func(offset int, format string, args ...any) {
		out = append(out, problem{name, lineOf(content, offset), fmt.Sprintf(format, args...)})
	}
	if name != ciEntryPoint {
		for i := indexAll(content, outside); len(i) > 0; i = i[1:] {
			add(i[0], "names %s, which is outside the repository: a clone does not have it", outside)
		}
	}
	for _, m := range staleRef.FindAllStringIndex(content, -1) {
		add(m[0], "cites %q, a document the repository does not have; cite docs/design.md (\"design §N\")", content[m[0]:m[1]])
	}
	for _, m := range designRef.FindAllStringSubmatchIndex(content, -1) {
		nums := []string{content[m[2]:m[3]]}
		for _, s := range section.FindAllStringSubmatch(content[m[4]:m[5]], -1) {
			nums = append(nums, s[1])
		}
		for _, n := range nums {
			if _, ok := d.sections[n]; !ok {
				add(m[0], "design §%s: %s has no such section", n, designPath)
			}
		}
	}
	if strings.HasSuffix(name, ".md") {
		out = append(out, checkLinks(name, content, d, have, anchors)...)
	}
	return out
}

// checkLinks judges the relative links of a Markdown file outside its code blocks. have holds
// every tracked file and every directory that holds one; anchors the anchors of every Markdown
// file.
func checkLinks(name, content string, d design, have map[string]bool, anchors map[string]map[string]bool) []problem {
	var out []problem
	// Code blocks are blanked byte for byte, so offsets into prose are offsets into content.
	prose := fence.ReplaceAllStringFunc(content, func(s string) string {
		b := []byte(s)
		for i := range b {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
		return string(b)
	})
	for _, m := range mdLink.FindAllStringSubmatchIndex(prose, -1) {
		text, target := prose[m[2]:m[3]], prose[m[4]:m[5]]
		add := func(format string, args ...any) {
			out = append(out, problem{name, lineOf(content, m[0]), fmt.Sprintf(format, args...)})
		}
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, frag, _ := strings.Cut(target, "#")
		resolved := name
		if file != "" {
			resolved = path.Join(path.Dir(name), file)
			switch {
			case resolved == ".." || strings.HasPrefix(resolved, "../"):
				add("links to %s, outside the repository", target)
				continue
			case !have[resolved]:
				add("links to %s, which the repository does not have", target)
				continue
			}
		}
		if resolved != designPath {
			if strings.HasSuffix(file, "design.md") {
				add("links to %s, which is not %s", target, designPath)
				continue
			}
			if a, ok := anchors[resolved]; ok && frag != "" && !a[frag] {
				add("links to %s: %s has no heading or anchor %q", target, resolved, frag)
			}
			continue
		}
		if frag != "" && !d.anchors[frag] {
			add("links to %s: %s has no anchor %q", target, designPath, frag)
		}
		if s := section.FindStringSubmatch(text); s != nil && frag != "s"+s[1] {
			add("the link text says §%s but the link goes to #%s", s[1], frag)
		}
	}
	return out
}

// markdownAnchors is every fragment a link into content may name: each <a id> and each
// heading's slug as GitHub makes it (lower case; letters, digits, spaces, '-' and '_' kept;
// spaces become '-'; a repeated slug gets "-1", "-2", …). Headings in code blocks are not
// headings.
func markdownAnchors(content string) map[string]bool {
	out := map[string]bool{}
	for _, m := range anchor.FindAllStringSubmatch(content, -1) {
		out[m[1]] = true
	}
	prose := fence.ReplaceAllString(content, "")
	seen := map[string]int{}
	for _, m := range anyHeading.FindAllStringSubmatch(prose, -1) {
		slug := slugOf(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugOf is GitHub's anchor for a heading's text. Inline markup is dropped first: links keep
// their text, and code spans, emphasis and HTML tags lose their markers.
func slugOf(text string) string {
	text = mdLink.ReplaceAllString(text, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func indexAll(s, sub string) []int {
	var at []int
	for i := 0; ; {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + len(sub)
	}
}

// lineCount is the number of lines of s, a last line without its newline included.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

func lineOf(s string, offset int) int {
	if offset < 0 {
		return 0
	}
	return strings.Count(s[:offset], "\n") + 1
}

// trackedFiles reads every tracked text file of the repository in the working directory.
func trackedFiles() (map[string]string, error) {
	list, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		return nil, fmt.Errorf("listing tracked files: %w", err)
	}
	files := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		b, err := os.ReadFile(name)
		switch {
		case os.IsNotExist(err):
			continue // deleted in the working tree, not yet in the index
		case err != nil:
			return nil, fmt.Errorf("reading %s: %w", name, err)
		case bytes.IndexByte(b, 0) >= 0:
			b = nil // binary: nothing to cite, but the name may be linked
		}
		files[name] = string(b)
	}
	return files, nil
}

func run(stdout io.Writer) error {
	files, err := trackedFiles()
	if err != nil {
		return err
	}
	problems := check(files)
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems with references; sections and anchors are those of %s", len(problems), designPath)
	}
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "designrefs:", err)
		os.Exit(1)
	}
}
