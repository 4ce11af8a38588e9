package decisionlog

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// keyFiles writes a fresh signing key (PKCS #8 PEM) and its public half
// (PKIX PEM) and returns their paths.
func keyFiles(t *testing.T, alg string) (priv, pub string) {
	t.Helper()
	var key any
	switch alg {
	case "EdDSA":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = k
	case "ES256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = k
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.(crypto.Signer).Public())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, pub = filepath.Join(dir, "checkpoint.key"), filepath.Join(dir, "checkpoint.pub")
	writeFile(t, priv, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	writeFile(t, pub, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})))
	return priv, pub
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func loadKeys(t *testing.T, path string) *Keys {
	t.Helper()
	k, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// writeLog writes n task events to a log file at path, closed, and returns
// its lines.
func writeLog(t *testing.T, path string, cfg config.DecisionLog, n int) []string {
	t.Helper()
	cfg.Output = path
	l, err := newLog(cfg, options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l.TaskChanged(taskEvent(i))
	}
	closeLog(t, l)
	return readLines(t, path)
}

func writeLines(t *testing.T, path string, ls []string) {
	t.Helper()
	writeFile(t, path, strings.Join(ls, "\n")+"\n")
}

// verifyFails verifies and returns the failure, failing the test when every
// line verified.
func verifyFails(t *testing.T, keys *Keys, paths ...string) *Failure {
	t.Helper()
	v, err := Verify(paths, keys)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() {
		t.Fatalf("verified, want a failure: %+v", v.Sequences)
	}
	return v.Failure
}

func wantFailure(t *testing.T, f *Failure, path string, line int, why string) {
	t.Helper()
	if f.File != path || f.Line != line || !strings.Contains(f.Reason, why) {
		t.Errorf("failure %v, want %s:%d %q", f, path, line, why)
	}
}

// reseal gives a line another place in the chain, as a forger who can
// compute SHA-256 would.
func reseal(line string, seq uint64, prev [sha256.Size]byte) string {
	s := seal{seq: seq, prev: prev}
	e := enc{b: []byte(strings.TrimSuffix(sealRE.ReplaceAllString(line, ""), "}")), comma: true}
	e.seal(&s)
	return string(e.b) + "}"
}

func digest(line string) [sha256.Size]byte { return sha256.Sum256([]byte(line + "\n")) }

func seqOf(t *testing.T, line string) uint64 {
	t.Helper()
	var ln Line
	if err := json.Unmarshal([]byte(line), &ln); err != nil {
		t.Fatal(err)
	}
	return ln.Seq
}

// signedLog is a closed log of 23 task lines with a checkpoint every 5
// lines, signed with a fresh Ed25519 key.
func signedLog(t *testing.T) (path string, ls []string, keys *Keys) {
	t.Helper()
	priv, pub := keyFiles(t, "EdDSA")
	path = filepath.Join(t.TempDir(), "decisions.log")
	ls = writeLog(t, path, config.DecisionLog{CheckpointEvery: 5, SigningKeyFile: priv}, 23)
	return path, ls, loadKeys(t, pub)
}

// TestVerifyIntact: a log as writ wrote it verifies, with every checkpoint
// signed and the close last, with either algorithm and either key format.
func TestVerifyIntact(t *testing.T) {
	for _, alg := range []string{"EdDSA", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			priv, pub := keyFiles(t, alg)
			path := filepath.Join(t.TempDir(), "decisions.log")
			ls := writeLog(t, path, config.DecisionLog{CheckpointEvery: 5, SigningKeyFile: priv}, 23)
			// log_started and 23 events, a checkpoint after every 5 lines
			// (log_started among the first), and the close.
			ty := types(t, ls)
			if ty[0] != TypeLogStarted || ty[5] != TypeCheckpoint || ty[11] != TypeCheckpoint || ty[len(ty)-1] != TypeCheckpoint {
				t.Fatalf("lines %v", ty)
			}
			var hdr struct {
				Alg, Kid string
			}
			var ln Line
			if err := json.Unmarshal([]byte(ls[5]), &ln); err != nil {
				t.Fatal(err)
			}
			jws, err := jose.ParseSignedCompact(ln.JWS, checkpointAlgs)
			if err != nil {
				t.Fatal(err)
			}
			hdr.Alg, hdr.Kid = jws.Signatures[0].Header.Algorithm, jws.Signatures[0].Header.KeyID
			s, err := LoadSigner(priv)
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Alg != alg || hdr.Kid != s.KeyID() || hdr.Kid == "" {
				t.Errorf("checkpoint header %+v, want alg %s kid %s", hdr, alg, s.KeyID())
			}
			for _, keys := range []*Keys{loadKeys(t, pub), loadKeys(t, jwksOf(t, pub, "a-kid-of-its-own"))} {
				v := verifyOK(t, keys, path)
				sq := v.Sequences[0]
				if sq.Lines != len(ls) || sq.Checkpoints == 0 || sq.Signed != sq.Checkpoints || !sq.Closed ||
					sq.LastCheckpoint != (Position{path, len(ls)}) || sq.After != 0 || len(sq.Notes) != 0 {
					t.Errorf("sequence %+v", sq)
				}
			}
		})
	}
}

// jwksOf writes the public key at pub as a JWKS with the given kid.
func jwksOf(t *testing.T, pub, kid string) string {
	t.Helper()
	raw, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(raw)
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k, KeyID: kid}}})
	if err != nil {
		t.Fatal(err)
	}
	path := pub + ".jwks.json"
	writeFile(t, path, string(doc))
	return path
}

// Threat: someone who can write the decision log changes what a line says
// (a denial into an allow, a caller's id, a time). Defence: each line
// carries the digest of the line before it; -verify names the edited line,
// whichever line it is and whichever byte (its body, its seq, its prev).
func TestVerifyEditedLine(t *testing.T) {
	path, ls, keys := signedLog(t)
	for i := range len(ls) - 1 {
		for _, edit := range []struct {
			name string
			do   func(string) string
		}{
			{"body", func(s string) string { return strings.Replace(s, `"time":"2`, `"time":"3`, 1) }},
			{"seq", func(s string) string {
				n := seqOf(t, s)
				return strings.Replace(s, fmt.Sprintf(`"seq":%d,`, n), fmt.Sprintf(`"seq":%d,`, n+100), 1)
			}},
			{"prev", func(s string) string {
				j := strings.Index(s, `"prev":"`) + len(`"prev":"`)
				c := byte('0')
				if s[j] == '0' {
					c = '1'
				}
				return s[:j] + string(c) + s[j+1:]
			}},
		} {
			t.Run(fmt.Sprintf("line %d %s", i+1, edit.name), func(t *testing.T) {
				bad := append([]string(nil), ls...)
				bad[i] = edit.do(bad[i])
				if bad[i] == ls[i] {
					t.Fatal("the edit changed nothing")
				}
				writeLines(t, path+".bad", bad)
				f := verifyFails(t, keys, path+".bad")
				if f.File != path+".bad" || f.Line != i+1 {
					t.Errorf("failure %v, want line %d", f, i+1)
				}
			})
		}
	}
}

// TestVerifyLastLineEdit: the last line is a signed checkpoint, so an edit
// to it is found with the key; without, nothing follows it to tell (the
// documented limit).
func TestVerifyLastLineEdit(t *testing.T) {
	path, ls, keys := signedLog(t)
	n := len(ls)
	ls[n-1] = strings.Replace(ls[n-1], `"reason":"close"`, `"reason":"interval"`, 1)
	writeLines(t, path, ls)
	wantFailure(t, verifyFails(t, keys, path), path, n, "the line was edited")
	if v := verifyOK(t, nil, path); v.Sequences[0].Closed {
		t.Error("an edited close still reads as closed")
	}
}

// Threat: a line is removed from the log (the denial that shows an attack).
// Defence: the next line's seq jumps and its prev names a line not there.
func TestVerifyDeletedLine(t *testing.T) {
	path, ls, keys := signedLog(t)
	for _, i := range []int{1, 2, 7, len(ls) - 2} {
		bad := append(append([]string(nil), ls[:i]...), ls[i+1:]...)
		writeLines(t, path+".bad", bad)
		wantFailure(t, verifyFails(t, keys, path+".bad"), path+".bad", i+1, "missing before it")
	}
	// The log's first line, deleted: the log no longer starts.
	writeLines(t, path+".bad", ls[1:])
	wantFailure(t, verifyFails(t, nil, path+".bad"), path+".bad", 1, "the log does not start here")
}

// Threat: lines are put in another order (a revocation made to come before
// the request it revoked). Defence: each line links to the one before it.
func TestVerifySwappedLines(t *testing.T) {
	path, ls, keys := signedLog(t)
	for _, i := range []int{1, 2, 9, len(ls) - 3} {
		bad := append([]string(nil), ls...)
		bad[i], bad[i+1] = bad[i+1], bad[i]
		writeLines(t, path+".bad", bad)
		wantFailure(t, verifyFails(t, keys, path+".bad"), path+".bad", i+1, "reordered")
	}
}

// Threat: a forged line is added (an allow that never happened), by someone
// who can compute digests and seqs. Defence: the line after it still links
// to the line before it; a line without a chain is named too.
func TestVerifyInsertedLine(t *testing.T) {
	path, ls, keys := signedLog(t)
	forged := sealRE.ReplaceAllString(strings.Replace(ls[2], "task-001", "task-666", 1), "")
	for _, i := range []int{2, 5, 10} {
		for name, line := range map[string]string{
			"chained":   reseal(forged, seqOf(t, ls[i]), digest(ls[i-1])),
			"wrong seq": reseal(forged, 77, digest(ls[i-1])),
			"unchained": forged,
			"copy":      ls[i-1],
		} {
			bad := append(append(append([]string(nil), ls[:i]...), line), ls[i:]...)
			writeLines(t, path+".bad", bad)
			f := verifyFails(t, keys, path+".bad")
			want := i + 1
			if name == "copy" {
				want = i // the original and its copy are the same bytes: the first is named
			}
			if f.Line != want || !strings.Contains(f.Reason, "inserted") && !strings.Contains(f.Reason, "carries no seq") {
				t.Errorf("%s line at %d: failure %v", name, i+1, f)
			}
		}
	}
}

// Threat: the end of a log is cut off. Defence, and its limit: cut mid-line
// it fails; cut after a checkpoint it verifies (nothing in the files can
// tell), but the log then does not end with writ's closing checkpoint, and
// -verify says so; lines after the last checkpoint are counted as
// uncovered.
func TestVerifyTruncated(t *testing.T) {
	path, ls, keys := signedLog(t)
	writeFile(t, path+".cut", strings.Join(ls[:10], "\n")+"\n"+ls[10][:20])
	wantFailure(t, verifyFails(t, keys, path+".cut"), path+".cut", 11, "incomplete")

	cp := 0
	for i, ty := range types(t, ls) {
		if ty == TypeCheckpoint && i < len(ls)-2 {
			cp = i
		}
	}
	writeLines(t, path+".cut", ls[:cp+1])
	s := verifyOK(t, keys, path+".cut").Sequences[0]
	if s.Closed || s.After != 0 || !strings.Contains(strings.Join(s.Notes, " "), "not its closing one") {
		t.Errorf("cut after a checkpoint: %+v", s)
	}
	writeLines(t, path+".cut", ls[:cp+3])
	s = verifyOK(t, keys, path+".cut").Sequences[0]
	if s.Closed || s.After != 2 || s.LastCheckpoint.Line != cp+1 || !strings.Contains(strings.Join(s.Notes, " "), "2 line(s) after the last checkpoint") {
		t.Errorf("cut after a line: %+v", s)
	}
}

// Threat: checkpoints forged or stripped by someone without the key, or a
// log rewritten with every digest recomputed. Defence: with the public key,
// a checkpoint must carry a signature that verifies and signs the chain as
// it is; without the key only the digest chain is checked, which a full
// rewrite passes (the documented limit of an unsigned log).
func TestVerifyCheckpointSignatures(t *testing.T) {
	path, ls, keys := signedLog(t)
	cp := 5 // the first interval checkpoint
	if types(t, ls)[cp] != TypeCheckpoint {
		t.Fatalf("line %d is not a checkpoint", cp+1)
	}
	var ln Line
	if err := json.Unmarshal([]byte(ls[cp]), &ln); err != nil {
		t.Fatal(err)
	}
	sig := ln.JWS[strings.LastIndexByte(ln.JWS, '.')+1:]
	// Another base64url character in the middle of the signature (a bit flip
	// could make '_' a backslash, and the line no longer JSON).
	flipped := []byte(sig)
	flipped[3] = 'A'
	if sig[3] == 'A' {
		flipped[3] = 'B'
	}
	_, otherPub := keyFiles(t, "EdDSA")
	for _, c := range []struct {
		name string
		line string
		keys *Keys
		why  string
	}{
		{"bad signature", strings.Replace(ls[cp], sig, string(flipped), 1), keys, "signature does not verify"},
		{"another key", ls[cp], loadKeys(t, otherPub), "no key given has its kid"},
		{"stripped", strings.Replace(ls[cp], `,"jws":"`+ln.JWS+`"`, "", 1), keys, "not signed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]string(nil), ls...)
			bad[cp] = c.line
			if c.name != "another key" {
				// A forger recomputes the chain after the line he changed.
				for i := cp + 1; i < len(bad); i++ {
					bad[i] = reseal(bad[i], seqOf(t, bad[i]), digest(bad[i-1]))
				}
			}
			writeLines(t, path+".bad", bad)
			wantFailure(t, verifyFails(t, c.keys, path+".bad"), path+".bad", cp+1, c.why)
		})
	}
	t.Run("rewritten", func(t *testing.T) {
		bad := append([]string(nil), ls...)
		bad[2] = strings.Replace(bad[2], "task-001", "task-666", 1)
		for i := 3; i < len(bad); i++ {
			bad[i] = reseal(bad[i], seqOf(t, bad[i]), digest(bad[i-1]))
		}
		writeLines(t, path+".bad", bad)
		wantFailure(t, verifyFails(t, keys, path+".bad"), path+".bad", cp+1, "signs another digest than the chain's")
		verifyOK(t, nil, path+".bad") // the documented limit: no key, no anchor
	})
}

// TestVerifyAcrossRotation: the chain runs through rotated files; an edit in
// a rotated file is named there, and a file missing between two given ones
// is found.
func TestVerifyAcrossRotation(t *testing.T) {
	priv, pub := keyFiles(t, "ES256")
	keys := loadKeys(t, pub)
	path := filepath.Join(t.TempDir(), "decisions.log")
	maxBytes := int64(4 * 1024)
	l, err := newLog(config.DecisionLog{Output: path, MaxBackups: 9, CheckpointEvery: 7, SigningKeyFile: priv}, options{maxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	for i := range n {
		l.TaskChanged(taskEvent(i))
	}
	closeLog(t, l)
	files := []string{path + ".3", path + ".2", path + ".1", path}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("want at least 3 rotations: %v", err)
		}
	}
	all, _ := filepath.Glob(path + "*")
	v := verifyOK(t, keys, all...)
	if len(v.Sequences) != 1 || !v.Sequences[0].Closed || len(v.Sequences[0].Notes) != 0 {
		t.Fatalf("sequences %+v", v.Sequences)
	}
	if got := eventsIn(t, v.Sequences[0].Files); got != n {
		t.Errorf("%d events across the files, want %d", got, n)
	}

	// An edit in a rotated file is named in it.
	ls := readLines(t, path+".2")
	orig := append([]string(nil), ls...)
	ls[3] = strings.Replace(ls[3], `"to":"running"`, `"to":"failed"`, 1)
	writeLines(t, path+".2", ls)
	wantFailure(t, verifyFails(t, keys, all...), path+".2", 4, "edited")
	writeLines(t, path+".2", orig)

	// A file left out between two given ones.
	wantFailure(t, verifyFails(t, keys, path+".3", path+".1", path), path+".1", 1, "file between them")
}

// eventsIn counts the event lines of the files.
func eventsIn(t *testing.T, files []string) int {
	t.Helper()
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(eventLines(string(raw)))
	}
	return n
}

// TestVerifyUnsignedLog: without a key the chain is still written and
// checked, checkpoints unsigned; -verify says what that leaves open.
func TestVerifyUnsignedLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	ls := writeLog(t, path, config.DecisionLog{CheckpointEvery: 5}, 12)
	s := verifyOK(t, nil, path).Sequences[0]
	if s.Checkpoints == 0 || s.Signed != 0 || !s.Closed || !strings.Contains(strings.Join(s.Notes, " "), "unsigned") {
		t.Errorf("sequence %+v", s)
	}
	bad := append([]string(nil), ls...)
	bad[3] = strings.Replace(bad[3], "task-002", "task-222", 1)
	writeLines(t, path, bad)
	wantFailure(t, verifyFails(t, nil, path), path, 4, "edited")
	// A key given, the unsigned checkpoints fail.
	writeLines(t, path, ls)
	_, pub := keyFiles(t, "EdDSA")
	wantFailure(t, verifyFails(t, loadKeys(t, pub), path), path, 6, "not signed")
}

// TestLinesLostAreTold: lines the buffer dropped and lines a failed write
// lost are told in the log itself, in a lines_lost line, and the chain goes
// on from the last line the output has.
func TestLinesLostAreTold(t *testing.T) {
	w := &flakyWriter{}
	l := mustWriter(t, w, config.DecisionLog{Buffer: 1}, options{logger: slog.New(slog.DiscardHandler)})
	l.TaskChanged(taskEvent(0))
	waitFor(t, func() bool { return l.Stats().Written == 1 })
	w.fail.Store(true)
	l.TaskChanged(taskEvent(1))
	waitFor(t, func() bool { return l.Stats().Errors == 1 })
	w.fail.Store(false)
	l.TaskChanged(taskEvent(2))
	closeLog(t, l)
	out := w.String()
	ls := lines(out)
	if got := fmt.Sprint(types(t, ls)); got != fmt.Sprint([]string{TypeLogStarted, TypeTaskStateChanged, TypeLinesLost, TypeTaskStateChanged, TypeCheckpoint}) {
		t.Fatalf("lines %s:\n%s", got, out)
	}
	if !strings.Contains(ls[2], `"failed":1`) {
		t.Errorf("lines_lost %s", ls[2])
	}
	path := filepath.Join(t.TempDir(), "decisions.log")
	writeFile(t, path, out)
	verifyOK(t, nil, path)

	// Dropped lines.
	bw := newBlockingWriter()
	l = mustWriter(t, bw, config.DecisionLog{Buffer: 2}, options{logger: slog.New(slog.DiscardHandler)})
	l.TaskChanged(taskEvent(0))
	<-bw.entered
	for i := range 7 {
		l.TaskChanged(taskEvent(i + 1))
	}
	close(bw.release)
	closeLog(t, l)
	var dropped uint64
	for _, s := range lines(bw.String()) {
		var ln Line
		if err := json.Unmarshal([]byte(s), &ln); err != nil {
			t.Fatal(err)
		}
		dropped += ln.Dropped
	}
	if st := l.Stats(); dropped != 5 || st.Dropped != 5 {
		t.Errorf("the log tells of %d dropped lines; stats %+v", dropped, st)
	}
	writeFile(t, path, bw.String())
	verifyOK(t, nil, path)
}

// flakyWriter fails every write while fail is set.
type flakyWriter struct {
	syncbuf.Buffer
	fail atomic.Bool
}

func (w *flakyWriter) Write(p []byte) (int, error) {
	if w.fail.Load() {
		return 0, errors.New("disk full")
	}
	return w.Buffer.Write(p)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTornTail: a run appending to a file whose last line a crash cut short
// ends that line first; the torn line is what -verify names.
func TestTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	ls := writeLog(t, path, config.DecisionLog{}, 3)
	writeFile(t, path, strings.Join(ls, "\n")+"\n"+`{"time":"2026-03-04T04:06:07Z","type":"task_sta`)
	l, err := newLog(config.DecisionLog{Output: path}, options{})
	if err != nil {
		t.Fatal(err)
	}
	l.TaskChanged(taskEvent(9))
	closeLog(t, l)
	got := readLines(t, path)
	if len(got) != len(ls)+4 || !strings.HasPrefix(got[len(ls)+1], `{"time"`) || !strings.Contains(got[len(ls)+1], TypeLogStarted) {
		t.Fatalf("lines after the torn one: %q", got[len(ls):])
	}
	wantFailure(t, verifyFails(t, nil, path), path, len(ls)+1, "not a JSON object")
}

// TestKeyFiles: the keys writ signs with, and refuses.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der := func(k any) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sec1, err := x509.MarshalECPrivateKey(p256)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ text, want string }{
		"rsa":                 {pemOf("PRIVATE KEY", der(rsaKey)), "Ed25519 or ECDSA P-256"},
		"p384":                {pemOf("PRIVATE KEY", der(p384)), "P-384"},
		"encrypted":           {pemOf("ENCRYPTED PRIVATE KEY", []byte("x")), "encrypted"},
		"public":              {pemOf("PUBLIC KEY", []byte("x")), "not a private key"},
		"not pem":             {"hello", "not a PEM file"},
		"two":                 {pemOf("PRIVATE KEY", der(p256)) + pemOf("PRIVATE KEY", der(p256)), "more than one"},
		"sec1":                {pemOf("EC PRIVATE KEY", sec1), ""},
		"sec1 with the curve": {pemOf("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}) + pemOf("EC PRIVATE KEY", sec1), ""},
	} {
		path := filepath.Join(dir, name+".pem")
		writeFile(t, path, c.text)
		s, err := LoadSigner(path)
		switch {
		case c.want == "" && (err != nil || s.Algorithm() != "ES256"):
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
	priv, _ := keyFiles(t, "EdDSA")
	for name, c := range map[string]struct{ text, want string }{
		"private":   {mustRead(t, priv), `"PRIVATE KEY" block`},
		"empty":     {"", "holds no key"},
		"jwks rsa":  {`{"keys":[{"kty":"RSA","n":"sXch","e":"AQAB"}]}`, "want a public Ed25519 or ECDSA P-256"},
		"bad jwks":  {`{"keys":`, "not a JWKS"},
		"jwks priv": {jwksPrivate(t), "want a public"},
	} {
		path := filepath.Join(dir, name+".pub")
		writeFile(t, path, c.text)
		if _, err := LoadKeys(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
	// A bad key stops the log from starting, naming the key.
	_, err = New(config.DecisionLog{Output: filepath.Join(dir, "d.log"), SigningKeyFile: filepath.Join(dir, "rsa.pem")})
	if err == nil || !strings.Contains(err.Error(), "signing_key_file") {
		t.Errorf("New with an RSA key: %v", err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jwksPrivate(t *testing.T) string {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k, KeyID: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// TestChainFields: a decision's chain and egress fields reach its line, in
// both formats.
func TestChainFields(t *testing.T) {
	ev := allowEvent()
	ev.ChainID, ev.Direction, ev.ParentDecisionID = "txn-1", events.DirectionEgress, "dec-in"
	ev.Initiator, ev.Intermediaries, ev.Target = "analyst-7", []string{"case-intake", "kyc-orchestrator"}, "sanctions-screener"
	want := `"chain_id":"txn-1","direction":"egress","parent_decision_id":"dec-in"`
	hop := `"initiator":"analyst-7","intermediaries":["case-intake","kyc-orchestrator"],"target":"sanctions-screener"`
	for _, format := range []string{"writ", "opa"} {
		var buf syncbuf.Buffer
		l := mustWriter(t, &buf, config.DecisionLog{Format: format}, options{})
		l.Decided(ev)
		closeLog(t, l)
		got := eventLines(buf.String())
		if len(got) != 1 || !strings.Contains(got[0], want) || !strings.Contains(got[0], hop) {
			t.Errorf("%s: %s", format, got)
		}
	}
}

// TestVerifyOPAFormat: in OPA's shape a decision line keeps its seq and prev
// in custom; the chain runs through it all the same.
func TestVerifyOPAFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	l, err := newLog(config.DecisionLog{Output: path, Format: "opa"}, options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Decided(allowEvent())
	l.Decided(denyEvent())
	l.TaskChanged(taskEvent(1))
	closeLog(t, l)
	ls := readLines(t, path)
	if !strings.Contains(ls[1], `"custom":{"cache_hit":true,"seq":2,"prev":"`) {
		t.Fatalf("OPA line %s", ls[1])
	}
	verifyOK(t, nil, path)
	ls[1] = strings.Replace(ls[1], `"allow":true`, `"allow":false`, 1)
	writeLines(t, path, ls)
	wantFailure(t, verifyFails(t, nil, path), path, 2, "edited")
}

// TestVerifyAfterUpgrade: a file an older writ wrote (lines without a
// chain) and a new run appending to it: the new lines verify, the old are
// noted as not verified; an unchained line put before a fresh log is not
// taken for them.
func TestVerifyAfterUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.log")
	old := sealRE.ReplaceAllString(string(appendTask(nil, new(taskEvent(0)), &seal{})), "")
	writeFile(t, path, old+old)
	l, err := newLog(config.DecisionLog{Output: path}, options{})
	if err != nil {
		t.Fatal(err)
	}
	l.TaskChanged(taskEvent(1))
	closeLog(t, l)
	s := verifyOK(t, nil, path).Sequences[0]
	if !strings.Contains(strings.Join(s.Notes, " "), "the 2 line(s) before "+path+":3 carry no chain") {
		t.Errorf("notes %q", s.Notes)
	}
	fresh := writeLog(t, path+".fresh", config.DecisionLog{}, 2)
	writeLines(t, path+".fresh", append([]string{strings.TrimSuffix(old, "\n")}, fresh...))
	wantFailure(t, verifyFails(t, nil, path+".fresh"), path+".fresh", 2, "not chained to it")
}
