package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
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
		{"an argument is a log", "", []string{"-log", reportLog, filepath.Join(dir, "extra")}, 1, "extra: no such file or directory"},
		{"stdin twice", "", []string{"-log", "-", "-"}, 2, "stdin (-) named twice"},
		{"key without verify", "", []string{"-key", "k.pem", reportLog}, 2, "-key and -closed go with -verify"},
		{"unknown chain", "", []string{"-log", reportLog, "-chain", "no-such-chain"}, 1, `no decision has chain_id "no-such-chain"`},
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

// writeCustodyLog writes a closed, signed decision log of n lifecycle
// events with decisionlog's own writer; it returns the log and the public
// key's paths.
func writeCustodyLog(t *testing.T, n int) (log, pub string) {
	t.Helper()
	dir := t.TempDir()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pubDER, _ := x509.MarshalPKIXPublicKey(key.Public())
	priv, pub := filepath.Join(dir, "ck.pem"), filepath.Join(dir, "ck.pub")
	os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
	log = filepath.Join(dir, "decisions.jsonl")
	l, err := decisionlog.New(config.DecisionLog{Output: log, CheckpointEvery: 4, SigningKeyFile: priv})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l.TaskChanged(events.Task{Kind: events.TaskCreated, Route: "r", TaskID: fmt.Sprint("task-", i), ContextID: "c", To: task.Running})
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return log, pub
}

// Threat: a decision log edited after the fact. Defence: writ report
// -verify checks the chain and the signed checkpoints, names the first line
// that does not verify, and exits 1.
func TestReportVerify(t *testing.T) {
	log, pub := writeCustodyLog(t, 10)
	code, out, errOut := runCLI(t, "", "report", "-verify", "-key", pub, log)
	if code != 0 || !strings.HasPrefix(out, "ok: 14 lines, 3 checkpoints, last checkpoint at line 14 ("+log+":14); 3 signatures verified; files: "+log+"\n") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	raw, _ := os.ReadFile(log)
	lines := strings.SplitAfter(string(raw), "\n")
	lines[6] = strings.Replace(lines[6], "task-4", "task-X", 1)
	os.WriteFile(log, []byte(strings.Join(lines, "")), 0o600)
	code, out, _ = runCLI(t, "", "report", "-verify", "-key", pub, log)
	if code != 1 || !strings.Contains(out, "FAIL: "+log+":7: edited") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// Without the key, the chain alone still names the line.
	if code, out, _ = runCLI(t, "", "report", "-verify", log); code != 1 || !strings.Contains(out, "FAIL: "+log+":7: edited") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// Cut after a checkpoint: it verifies, says so, and -closed refuses it.
	os.WriteFile(log, []byte(strings.Join(lines[:5], "")), 0o600)
	lines[6] = strings.Replace(lines[6], "task-X", "task-4", 1)
	if code, out, _ = runCLI(t, "", "report", "-verify", "-key", pub, log); code != 0 || !strings.Contains(out, "note: the log ends at a checkpoint that is not its closing one") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI(t, "", "report", "-verify", "-key", pub, "-closed", log); code != 1 || !strings.Contains(out, "does not end with writ's closing checkpoint (-closed)") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if code, _, errOut = runCLI(t, "", "report", "-verify", "-key", log, log); code != 2 || !strings.Contains(errOut, "-key:") {
		t.Fatalf("a log as the key: exit %d\n%s", code, errOut)
	}
	// A log from before the chain verifies nothing, and says so.
	if code, out, _ = runCLI(t, "", "report", "-verify", reportLog); code != 1 || !strings.Contains(out, "FAIL: "+reportLog+":1: no line carries a chain") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// The report reads a chained log like any other.
	if code, out, errOut = runCLI(t, "", "report", "-text", log); code != 0 || out != "no decision carries a chain id\n" {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestReportChain: writ report -chain over several writs' logs, as text and
// as the page.
func TestReportChain(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, ds ...events.Decision) string {
		path := filepath.Join(dir, name)
		l, err := decisionlog.New(config.DecisionLog{Output: path})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			l.Decided(d)
		}
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	a := write("a.log",
		events.Decision{Time: t0, ID: "a-in", Route: "agent-a", Operation: task.OpSend, ChainID: "txn-1", Allow: true,
			Caller: events.Caller{Authenticated: true, AgentID: "portal", UserID: "analyst-7"}},
		events.Decision{Time: t0.Add(time.Millisecond), ID: "a-out", Route: "agent-a", Operation: task.OpSend, ChainID: "txn-1", Allow: true,
			Direction: events.DirectionEgress, ParentDecisionID: "a-in", Initiator: "analyst-7", Intermediaries: []string{"portal", "agent-a"}, Target: "agent-b"})
	b := write("b.log",
		events.Decision{Time: t0.Add(2 * time.Millisecond), ID: "b-in", Route: "agent-b", Operation: task.OpSend, ChainID: "txn-1",
			Caller:  events.Caller{Authenticated: true, AgentID: "agent-a", UserID: "analyst-7", Chain: []string{"portal"}},
			Denials: []task.Denial{{Code: "SCOPE_MISSING", Reason: "no payments:read"}}})
	code, out, errOut := runCLI(t, "", "report", "-text", "-chain", "txn-1", b, a)
	if code != 0 || !strings.Contains(out, "3 decision(s) (2 allowed, 1 denied)") ||
		!regexp.MustCompile(`(?s)decision a-in .*decision a-out .*decision b-in · `+regexp.QuoteMeta(b)+`:2 · after 2`).MatchString(out) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ = runCLI(t, "", "report", "-text", a, b); code != 0 || !strings.HasPrefix(out, "txn-1  initiator analyst-7  2 hop(s)  3 decision(s)") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "", "report", "-log", a, "-log", b, "-chain", "txn-1")
	if code != 0 || !strings.Contains(out, `id="delegation-decisions">3<`) || !strings.Contains(out, `<span class="mono" id="logs">`+a+`, `+b+`</span>`) {
		t.Fatalf("exit %d\n%.3000s", code, out)
	}
	// Both logs verify, each its own chain.
	if code, out, _ = runCLI(t, "", "report", "-verify", a, b); code != 0 || strings.Count(out, "ok: ") != 2 {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestValidateSigningKey: writ validate loads the checkpoint key as writ
// serve would, and names the key when it cannot.
func TestValidateSigningKey(t *testing.T) {
	chdirRoot(t)
	raw, _ := seedFile(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "rsa.pem")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	cfg := filepath.Join(dir, "writ.yaml")
	os.WriteFile(cfg, []byte(string(raw)+"decision_log:\n  signing_key_file: "+key+"\n"), 0o600)
	code, _, errOut := runCLI(t, "", "validate", "-offline", "-config", cfg)
	if code != 1 || !strings.Contains(errOut, "decision_log.signing_key_file: "+key+": an RSA key: checkpoints are signed with Ed25519 or ECDSA P-256") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}

// TestValidateCardKeys: writ validate reads the card keys as writ serve
// would at start (an agent's card_keys, writ's own signing key), naming the
// key of each it cannot use, and creates no key.
func TestValidateCardKeys(t *testing.T) {
	chdirRoot(t)
	raw, _ := seedFile(t)
	dir := t.TempDir()
	notJWKS := filepath.Join(dir, "agent.jwks")
	os.WriteFile(notJWKS, []byte(`{"keys":[]}`), 0o600)
	signing := filepath.Join(dir, "card.jwk")
	cfg := filepath.Join(dir, "writ.yaml")
	body := strings.Replace(string(raw), "agents:\n  - ", "agents:\n  - card_keys: "+notJWKS+"\n    ", 1)
	os.WriteFile(cfg, []byte(body+"cards:\n  signing_key_file: "+signing+"\n"), 0o600)
	code, _, errOut := runCLI(t, "", "validate", "-offline", "-config", cfg)
	if code != 1 || !strings.Contains(errOut, "agents[0].card_keys: the key set has no keys") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(signing); err == nil {
		t.Error("writ validate created the signing key")
	}
	os.WriteFile(signing, []byte(`{"kty":"oct","k":"c2VjcmV0"}`), 0o600)
	if code, _, errOut = runCLI(t, "", "validate", "-offline", "-config", cfg); code != 1 || !strings.Contains(errOut, "cards.signing_key_file") {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
}
