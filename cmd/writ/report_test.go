package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const reportLog = "../../report/testdata/decisions.jsonl"

func TestReportToStdout(t *testing.T) {
	code, out, errOut := runCLI(t, "", "report", "--log", reportLog, "--context", "ctx-pmt-771", "--title", "PMT-771")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"<title>PMT-771</title>", `id="total-decisions">15<`, `id="total-denied">8<`,
		`id="code-TENANT_NOT_PERMITTED">2<`, `id="context-events">8<`} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if errOut != "" {
		t.Errorf("stderr: %s", errOut)
	}
}

func TestReportStdinToFile(t *testing.T) {
	raw, err := os.ReadFile(reportLog)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "report.html")
	code, out, errOut := runCLI(t, string(raw), "report", "-log", "-", "-o", dst)
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, out, errOut)
	}
	page, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `id="total-allowed">7<`) || strings.Contains(string(page), `id="context"`) {
		t.Error("the written page is not the log's report")
	}
	if !strings.Contains(errOut, "15 decisions (7 allowed, 8 denied) from stdin written to "+dst) {
		t.Errorf("stderr: %s", errOut)
	}
}

func TestReportErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"time":"2026-11-03T09:00:00Z","type":"decision","allow":true}`+"\n\n"+`{"time":`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out.html")
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"no log", "", nil, 2, "-log is required"},
		{"extra argument", "", []string{"-log", reportLog, "extra"}, 2, `unexpected argument "extra"`},
		{"unknown flag", "", []string{"-logs", reportLog}, 2, "flag provided but not defined: -logs"},
		{"missing file", "", []string{"-log", filepath.Join(dir, "nope.jsonl")}, 1, "nope.jsonl: no such file or directory"},
		{"malformed line", "", []string{"-log", bad, "-o", dst}, 1, "bad.jsonl: line 3:"},
		{"malformed stdin", "{}\nnot json\n", []string{"-log", "-"}, 1, "stdin: line 2: not a JSON object"},
		{"unknown context", "", []string{"-log", reportLog, "-context", "ctx-nowhere"}, 1, `no event has context_id "ctx-nowhere"`},
		{"unwritable output", "", []string{"-log", reportLog, "-o", filepath.Join(dir, "no", "such", "dir.html")}, 1, "no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, c.stdin, append([]string{"report"}, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant it to contain %q", code, c.code, errOut, c.want)
			}
			if out != "" {
				t.Errorf("a failed report wrote to stdout: %.100q", out)
			}
		})
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a malformed log left an output file behind: %v", err)
	}
}

func TestReportHelp(t *testing.T) {
	code, out, _ := runCLI(t, "", "report", "-h")
	if code != 0 || !strings.Contains(out, "usage: writ report -log FILE") || !strings.Contains(out, "-context") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if code, out, _ := runCLI(t, "", "help"); code != 0 || !strings.Contains(out, "writ report -log FILE") {
		t.Errorf("the usage text does not list report: %s", out)
	}
}
