// Command securitydoc writes SECURITY.md from the test run: the threat model
// (model.md beside this file) and a matrix of every threat a test names —
// threat, defence, test, result of this run. A test enters the matrix by its
// doc comment: "Threat: ... Defence: ...". Run it with `make security`.
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

//go:embed model.md
var model string

// Case is one threat a test proves a defence against.
type Case struct {
	Package, Test, File string
	Threat, Defence     string
	Result              string // pass, fail, skip, or "not run"
}

func main() {
	root := flag.String("root", ".", "the repository root")
	out := flag.String("o", "SECURITY.md", "where to write")
	run := flag.Bool("run", true, "run the tests (false: list them as not run)")
	flag.Parse()
	cases, err := Collect(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "securitydoc:", err)
		os.Exit(1)
	}
	if *run {
		if err := Run(*root, cases); err != nil {
			fmt.Fprintln(os.Stderr, "securitydoc:", err)
			os.Exit(1)
		}
	}
	var b bytes.Buffer
	Write(&b, cases, time.Now())
	path := *out
	if !filepath.IsAbs(path) {
		path = filepath.Join(*root, path)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil { //nolint:gosec // a document for everyone to read
		fmt.Fprintln(os.Stderr, "securitydoc:", err)
		os.Exit(1)
	}
	failed := 0
	for _, c := range cases {
		if c.Result != "pass" {
			failed++
		}
	}
	fmt.Printf("SECURITY.md: %d threats, %d not passing\n", len(cases), failed)
	if failed > 0 && *run {
		os.Exit(1)
	}
}

// Collect finds every test whose doc comment names a threat and its defence.
func Collect(root string) ([]Case, error) {
	var cases []Case
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git", ".tools":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Doc == nil {
				continue
			}
			threat, defence, ok := split(fn.Doc.Text())
			if !ok {
				continue
			}
			cases = append(cases, Case{Package: "./" + filepath.ToSlash(filepath.Dir(rel)), Test: fn.Name.Name,
				File: filepath.ToSlash(rel), Threat: threat, Defence: defence, Result: "not run"})
		}
		return nil
	})
	sort.Slice(cases, func(i, j int) bool {
		if cases[i].Package != cases[j].Package {
			return cases[i].Package < cases[j].Package
		}
		return cases[i].Test < cases[j].Test
	})
	return cases, err
}

// split reads "Threat: ... Defence: ..." out of a doc comment.
func split(doc string) (threat, defence string, ok bool) {
	doc = strings.Join(strings.Fields(doc), " ")
	i := strings.Index(doc, "Threat:")
	j := strings.Index(doc, "Defence:")
	if i < 0 || j < i {
		return "", "", false
	}
	return strings.TrimSpace(doc[i+len("Threat:") : j]), strings.TrimSpace(doc[j+len("Defence:"):]), true
}

// Run runs the cases' tests (go test -json, once per package) and records
// each result.
func Run(root string, cases []Case) error {
	byPkg := map[string][]int{}
	var pkgs []string
	for i, c := range cases {
		if _, ok := byPkg[c.Package]; !ok {
			pkgs = append(pkgs, c.Package)
		}
		byPkg[c.Package] = append(byPkg[c.Package], i)
	}
	for _, pkg := range pkgs {
		var names []string
		for _, i := range byPkg[pkg] {
			names = append(names, cases[i].Test)
		}
		dir, rel := moduleOf(root, pkg)
		cmd := exec.Command("go", "test", "-count=1", "-json", "-run", "^("+strings.Join(names, "|")+")$", rel) //nolint:gosec // the repository's own test names and packages, read from its sources
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		results := readResults(stdout)
		_ = cmd.Wait() // a failing test is a result, not an error
		for _, i := range byPkg[pkg] {
			if r, ok := results[cases[i].Test]; ok {
				cases[i].Result = r
			}
		}
	}
	return nil
}

// moduleOf is the module a package directory (./a/b, relative to root) is in
// — the nearest directory at or above it with a go.mod, root at the latest —
// and the package's path relative to that module, for go test to run it
// there (the Helm chart's tests are a module of their own).
func moduleOf(root, pkg string) (dir, rel string) {
	d := filepath.Join(root, filepath.FromSlash(pkg))
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(d)
		if r, err := filepath.Rel(root, d); err != nil || r == "." || parent == d {
			return root, pkg
		}
		d = parent
	}
	r, err := filepath.Rel(d, filepath.Join(root, filepath.FromSlash(pkg)))
	if err != nil {
		return root, pkg
	}
	return d, "./" + filepath.ToSlash(r)
}

// readResults maps each top-level test of a go test -json stream to its result.
func readResults(r io.Reader) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Action, Test string
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" || strings.Contains(ev.Test, "/") {
			continue
		}
		switch ev.Action {
		case "pass", "fail", "skip":
			out[ev.Test] = ev.Action
		}
	}
	return out
}

// Write renders SECURITY.md.
func Write(w io.Writer, cases []Case, at time.Time) {
	fmt.Fprint(w, strings.TrimRight(model, "\n")+"\n\n")
	fmt.Fprintf(w, "## The matrix\n\nGenerated by `make security` on %s (%s, %s/%s) from the tests below: each row is a\n"+
		"test whose doc comment names the threat and the defence, and its result in that run. Do not edit by hand.\n\n",
		at.UTC().Format("2006-01-02"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprint(w, "| threat | defence | test | result |\n|---|---|---|---|\n")
	for _, c := range cases {
		fmt.Fprintf(w, "| %s | %s | [`%s`](%s) | %s |\n", cell(c.Threat), cell(c.Defence), c.Test, c.File, c.Result)
	}
}

// cell is s as one table cell: a capital first letter, pipes escaped.
func cell(s string) string {
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
