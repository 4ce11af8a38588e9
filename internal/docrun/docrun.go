// Package docrun runs the marked blocks of a Markdown page exactly as printed,
// for the tests that keep README's and docs/' walk-throughs true: a block
// marked `<!-- readme-test SECTION: KIND -->` (or `doc-test`) before a fenced
// block is extracted from the page itself, never copied into the test.
package docrun

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/writ-authz/writ/internal/syncbuf"
)

// Block is one marked block of a page.
type Block struct {
	// Kind is "run" (a bash script that must succeed), "background" (a bash
	// script left running, as in a terminal of its own) or "file" (the
	// block's text, written to File).
	Kind, File string
	// Text is the block's content, with a final newline.
	Text string
}

var blockRE = regexp.MustCompile("(?s)<!-- (?:readme|doc)-test ([a-z0-9-]+): (run|background|file [^ ]+) -->\\s*\\n```[a-z]*\\n(.*?)\\n```")

// Section extracts the blocks of section name from the page at path, in
// order. A page without any is a test failure: the page and its test have
// drifted apart.
func Section(t testing.TB, path, name string) []Block {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Block
	for _, m := range blockRE.FindAllStringSubmatch(string(raw), -1) {
		if m[1] != name {
			continue
		}
		b := Block{Kind: m[2], Text: m[3] + "\n"}
		if f, ok := strings.CutPrefix(m[2], "file "); ok {
			b.Kind, b.File = "file", f
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no blocks of section %s", path, name)
	}
	return out
}

// Runner runs blocks in Dir with Env.
type Runner struct {
	Dir string
	Env []string
	// Ready returns once the process a background block started is ready
	// (log is what it has written so far); it fails the test when it never
	// is. Nil: background blocks are not waited for.
	Ready func(t testing.TB, b Block, log *syncbuf.Buffer)
}

// Run runs the blocks in order and returns what the run blocks printed. A
// run block that fails fails the test with its output. A background block
// runs in a process group of its own with stdin held open (a terminal's
// would be: a program that exits when its stdin closes keeps running); a
// cleanup stops the group (SIGTERM) and waits for it.
func (r Runner) Run(t testing.TB, blocks []Block) string {
	t.Helper()
	var output bytes.Buffer
	for i, b := range blocks {
		switch b.Kind {
		case "file":
			if err := os.WriteFile(filepath.Join(r.Dir, b.File), []byte(b.Text), 0o600); err != nil {
				t.Fatal(err)
			}
		case "run":
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", b.Text) //nolint:gosec // G204: running the page's own blocks is this package's job
			cmd.Dir, cmd.Env = r.Dir, r.Env
			out, err := cmd.CombinedOutput()
			output.Write(out)
			if err != nil {
				t.Fatalf("block %d failed: %v\n%s\n--- output:\n%s", i, err, b.Text, out)
			}
		case "background":
			r.background(t, b)
		default:
			t.Fatalf("block %d: unknown kind %q", i, b.Kind)
		}
	}
	return output.String()
}

func (r Runner) background(t testing.TB, b Block) {
	t.Helper()
	var log syncbuf.Buffer
	stdin, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", b.Text) //nolint:gosec // G204: running the page's own blocks is this package's job
	cmd.Dir, cmd.Env = r.Dir, r.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = stdin.Close()
	if err != nil {
		_ = hold.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = hold.Close()
		if t.Failed() {
			t.Logf("--- %s:\n%s", strings.TrimSpace(b.Text), log.String())
		}
	})
	if r.Ready != nil {
		r.Ready(t, b, &log)
	}
}
