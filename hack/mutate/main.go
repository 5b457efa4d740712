// Command mutate removes one safety check at a time (hack/mutations.txt) in a private copy of
// the repository and runs the tests of the mutated package: every mutant must be killed.
// It proves the claim that deleting any single safety rule makes a test fail.
//
//	go run ./hack/mutate [-list hack/mutations.txt]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

type mutation struct {
	line          int
	file, old, nu string
	why           string
	// tests is the package whose tests must kill the mutant; the mutated file's by default.
	tests string
}

func main() {
	list := flag.String("list", "hack/mutations.txt", "mutations: file<TAB>old<TAB>new<TAB>rule[<TAB>test package], one per line")
	only := flag.String("only", "", "run only the mutations of files whose path contains this")
	flag.Parse()
	all, err := readMutations(*list)
	if err != nil {
		fail(err)
	}
	var muts []mutation
	for _, m := range all {
		if strings.Contains(m.file, *only) {
			muts = append(muts, m)
		}
	}
	work, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(work)
	if err := copyTree(".", work); err != nil {
		fail(err)
	}
	// The copy has no bin/: the real API server tests find this checkout's binaries, so a mutant
	// of an adapter is killed by a failing test, never by a test environment that cannot start.
	env := os.Environ()
	if os.Getenv("KUBETEST_BIN_DIR") == "" {
		bin, err := filepath.Abs("bin")
		if err != nil {
			fail(err)
		}
		env = append(env, "KUBETEST_BIN_DIR="+bin)
	}
	// Likewise test/install's kustomize CLI (make kustomize).
	if os.Getenv("KUSTOMIZE") == "" {
		k, err := filepath.Abs(filepath.Join("bin", "kustomize"))
		if err != nil {
			fail(err)
		}
		env = append(env, "KUSTOMIZE="+k)
	}
	survived := 0
	for i, m := range muts {
		path := filepath.Join(work, m.file)
		orig, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		if n := bytes.Count(orig, []byte(m.old)); n != 1 {
			fail(fmt.Errorf("%s:%d: %q occurs %d times in %s; make the pattern unique", *list, m.line, m.old, n, m.file))
		}
		mutated := bytes.Replace(orig, []byte(m.old), []byte(m.nu), 1)
		if err := os.WriteFile(path, mutated, 0o644); err != nil {
			fail(err)
		}
		start := time.Now()
		pkg := "./" + filepath.Dir(m.file)
		if m.tests != "" {
			pkg = m.tests
		}
		cmd := exec.Command("go", "test", "-count=1", "-failfast", pkg)
		cmd.Dir = work
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		verdict := "killed"
		if err == nil {
			verdict = "SURVIVED"
			survived++
		} else if bytes.Contains(out, []byte("build failed")) || bytes.Contains(out, []byte("[setup failed]")) {
			verdict = "DOES NOT COMPILE"
			survived++
		}
		fmt.Printf("%2d/%d %-16s %-26s %s (%.0fs)\n", i+1, len(muts), verdict, m.file, m.why, time.Since(start).Seconds())
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			fail(err)
		}
	}
	fmt.Printf("%d mutants, %d killed, %d survived or broke the build\n", len(muts), len(muts)-survived, survived)
	if survived > 0 {
		os.Exit(1)
	}
}

func readMutations(path string) ([]mutation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mutation
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "\t")
		if len(parts) != 4 && len(parts) != 5 {
			return nil, fmt.Errorf("%s:%d: want file<TAB>old<TAB>new<TAB>rule[<TAB>test package]", path, n)
		}
		unescape := func(s string) string { return strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(s) }
		m := mutation{line: n, file: parts[0], old: unescape(parts[1]), nu: unescape(parts[2]), why: parts[3]}
		if len(parts) == 5 {
			m.tests = parts[4]
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// copyTree copies the Go sources and module files the tests need, skipping bin/ and .git.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") && path != src {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, path)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(2)
}
