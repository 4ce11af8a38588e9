package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// The policy of the bundles these tests serve: every request denied with a
// code made of the module's own revision and the data's, so a decision
// made by a half-loaded policy (one bundle's module with another's data)
// shows in its code; and a Rego test the gate runs.
const bundleModule = `package writ.authz

mine := %q

decision := {"allow": false, "denials": [{"code": sprintf("rev_%%s_%%s", [mine, data.rotation.code]), "reason": "rotation"}]}
`

const bundleTest = `package writ.authz_test

import data.writ.authz

test_mine_matches_data if authz.mine == %q
`

// bundleSpec is one bundle the tests build with OPA's bundle writer.
type bundleSpec struct {
	rev string
	// testWants is what the bundle's Rego test expects mine to be (rev when
	// empty: the test passes).
	testWants string
	// pad adds a data file of that many bytes.
	pad int
	// key signs the bundle (with keyID and, when set, the claims in
	// claims); nil: unsigned.
	key    *rsa.PrivateKey
	keyID  string
	claims string
}

// build writes the bundle's tarball, signed as spec says.
func (spec bundleSpec) build(t *testing.T) []byte {
	t.Helper()
	wants := spec.testWants
	if wants == "" {
		wants = spec.rev
	}
	data := map[string]any{"rotation": map[string]any{"code": spec.rev}}
	if spec.pad > 0 {
		data["pad"] = strings.Repeat("x", spec.pad)
	}
	roots := []string{"writ", "rotation", "pad"}
	b := bundle.Bundle{
		Manifest: bundle.Manifest{Revision: spec.rev, Roots: &roots},
		Data:     data,
		Modules: []bundle.ModuleFile{
			{URL: "/writ/authz/policy.rego", Path: "/writ/authz/policy.rego", Raw: fmt.Appendf(nil, bundleModule, spec.rev)},
			{URL: "/writ/authz/policy_test.rego", Path: "/writ/authz/policy_test.rego", Raw: fmt.Appendf(nil, bundleTest, wants)},
		},
	}
	if spec.key != nil {
		sc := bundle.NewSigningConfig(string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY",
			Bytes: x509.MarshalPKCS1PrivateKey(spec.key)})), "RS256", "")
		if spec.claims != "" {
			path := filepath.Join(t.TempDir(), "claims.json")
			if err := os.WriteFile(path, []byte(spec.claims), 0o600); err != nil {
				t.Fatal(err)
			}
			sc.ClaimsPath = path
		}
		if err := b.GenerateSignature(sc, spec.keyID, false); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bundleServer is a bundle service on loopback: it serves the current
// tarball at /bundles/writ.tar.gz with an ETag, answers a matching
// If-None-Match 304, and counts both.
type bundleServer struct {
	url      string
	mu       sync.Mutex
	body     []byte
	etag     string
	changed  chan struct{} // closed (and replaced) by set
	ok, same atomic.Int64
	// held counts polls held open (OPA's long-polling: Prefer: wait=N).
	held atomic.Int64
}

func newBundleServer(t *testing.T, body []byte) *bundleServer {
	t.Helper()
	bs := &bundleServer{changed: make(chan struct{})}
	bs.set(body)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(bs.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	bs.url = "http://" + ln.Addr().String() + "/bundles/writ.tar.gz"
	return bs
}

func (bs *bundleServer) set(body []byte) {
	sum := sha256.Sum256(body)
	bs.mu.Lock()
	bs.body, bs.etag = body, `"`+hex.EncodeToString(sum[:8])+`"`
	close(bs.changed)
	bs.changed = make(chan struct{})
	bs.mu.Unlock()
}

func (bs *bundleServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/bundles/writ.tar.gz" {
		http.NotFound(w, r)
		return
	}
	bs.mu.Lock()
	body, etag, changed := bs.body, bs.etag, bs.changed
	bs.mu.Unlock()
	_, wait, longPoll := strings.Cut(r.Header.Get("Prefer"), "wait=")
	if longPoll {
		// The bundle protocol's long-polling: an unchanged bundle's poll is
		// held until it changes or the wait ends; the content type says
		// the service takes part.
		w.Header().Set("Content-Type", "application/vnd.openpolicyagent.bundles")
		if strings.Contains(r.Header.Get("If-None-Match"), etag) {
			secs, _ := time.ParseDuration(strings.TrimSpace(wait) + "s")
			bs.held.Add(1)
			select {
			case <-changed:
			case <-time.After(secs):
			case <-r.Context().Done():
				return
			}
			bs.mu.Lock()
			body, etag = bs.body, bs.etag
			bs.mu.Unlock()
		}
	}
	w.Header().Set("ETag", etag)
	if strings.Contains(r.Header.Get("If-None-Match"), etag) {
		bs.same.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	bs.ok.Add(1)
	if !longPoll {
		w.Header().Set("Content-Type", "application/gzip")
	}
	_, _ = w.Write(body)
}

// bundleConfig is the seed's configuration with its policy from url,
// polled every second, persisted in dir.
func bundleConfig(t *testing.T, url, dir string, mutate func(*config.PolicyBundle)) *config.Config {
	t.Helper()
	return seed(t, func(c *config.Config) {
		c.Policies = nil
		c.PolicyBundle = &config.PolicyBundle{URL: url, PollMin: time.Second, PollMax: time.Second,
			MaxBytes: config.DefaultBundleMaxBytes, StartWait: 5 * time.Second, PersistDir: dir}
		if mutate != nil {
			mutate(c.PolicyBundle)
		}
	})
}

// waitFor polls cond for up to 15s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// bundleRev is the bundle revision in a policy revision (after "@").
func bundleRev(revision string) string {
	_, rev, _ := strings.Cut(revision, "@")
	return rev
}

// decisions is an events sink keeping every decision by id.
type decisions struct {
	mu   sync.Mutex
	byID map[string]events.Decision
}

func (d *decisions) Decided(e events.Decision) {
	d.mu.Lock()
	d.byID[e.ID] = e
	d.mu.Unlock()
}
func (*decisions) Served(events.Request)   {}
func (*decisions) TaskChanged(events.Task) {}
func (*decisions) Pushed(events.Push)      {}

const sendBody = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`

// TestBundleRotationUnderLoad: the bundle service rotates the policy three
// times while requests run through the sidecar; every decision names the
// revision it was made by, that revision was serving between the request's
// start and its answer, and its code shows module and data of that one
// bundle.
//
// Threat: a policy rotated while requests are decided answers some of them
// with a half-loaded policy (one bundle's rules with another's data), or
// logs a revision that was not the one deciding, so the audit trail cannot
// say which policy allowed what. Defence: a bundle becomes a whole
// authz.Policy (compiled, tested, its known requests decided) before one
// atomic swap, and every decision carries the revision of the policy value
// that made it.
func TestBundleRotationUnderLoad(t *testing.T) {
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	sink := &decisions{byID: map[string]events.Decision{}}
	s, err := New(t.Context(), bundleConfig(t, bs.url, t.TempDir(), nil), WithLogger(quiet()), WithEvents(sink))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	order := []string{s.Engine().Revision()}
	if bundleRev(order[0]) != "r1" {
		t.Fatalf("revision at start %q", order[0])
	}
	type answer struct{ id, before, after string }
	var mu sync.Mutex
	var answers []answer
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := s.Engine().Revision()
				resp, err := http.Post(s.URL()+"/", "application/json", strings.NewReader(sendBody))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				after := s.Engine().Revision()
				mu.Lock()
				answers = append(answers, answer{id: resp.Header.Get("Writ-Decision-Id"), before: before, after: after})
				mu.Unlock()
			}
		})
	}
	for _, rev := range []string{"r2", "r3", "r4"} {
		bs.set(bundleSpec{rev: rev}.build(t))
		waitFor(t, rev+" serving", func() bool { return bundleRev(s.Engine().Revision()) == rev })
		order = append(order, s.Engine().Revision())
		time.Sleep(200 * time.Millisecond) // requests decided by it
	}
	close(stop)
	wg.Wait()
	index := map[string]int{}
	for i, r := range order {
		index[r] = i
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	seen := map[string]int{}
	for _, a := range answers {
		d, ok := sink.byID[a.id]
		if !ok {
			t.Fatalf("answer with decision id %q: no such decision", a.id)
		}
		i, ok := index[d.Revision]
		if !ok {
			t.Fatalf("decision %s names revision %q, never active (active: %v)", a.id, d.Revision, order)
		}
		if i < index[a.before] || i > index[a.after] {
			t.Errorf("decision %s by %q, not active between the request's start (%q) and its answer (%q)", a.id, d.Revision, a.before, a.after)
		}
		rev := bundleRev(d.Revision)
		if len(d.Denials) != 1 || d.Denials[0].Code != "rev_"+rev+"_"+rev {
			t.Errorf("decision %s by %q has denials %v: not that bundle's whole policy", a.id, d.Revision, d.Denials)
		}
		seen[rev]++
	}
	for _, rev := range []string{"r1", "r2", "r3", "r4"} {
		if seen[rev] == 0 {
			t.Errorf("no request decided by %s (%v): the load did not run across the rotation", rev, seen)
		}
	}
}

// TestBundleETagNotModified: polls of an unchanged bundle are answered 304
// through the ETag, and none of them reloads the policy.
func TestBundleETagNotModified(t *testing.T) {
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	s, err := New(t.Context(), bundleConfig(t, bs.url, "", nil), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	waitFor(t, "two 304 answers", func() bool { return bs.same.Load() >= 2 })
	if n := bs.ok.Load(); n != 1 {
		t.Errorf("the bundle was sent %d times, want once (then 304s)", n)
	}
	if ok, failed := s.reloader.Counts(); ok != 0 || failed != 0 {
		t.Errorf("reloads ok=%d failed=%d after 304s, want none", ok, failed)
	}
}

// TestBundleLongPoll: with long_poll set, writ holds its poll open at the
// service (OPA's long-polling) and a new bundle serves at once, long before
// the next poll of poll_min would have come.
func TestBundleLongPoll(t *testing.T) {
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	s, err := New(t.Context(), bundleConfig(t, bs.url, "", func(b *config.PolicyBundle) {
		b.PollMin, b.PollMax, b.LongPoll = 60*time.Second, 60*time.Second, 30*time.Second
	}), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	// The first poll after the start's download tells writ the service
	// long-polls; the one after it is held.
	waitFor(t, "a poll held open", func() bool { return bs.held.Load() >= 1 })
	start := time.Now()
	bs.set(bundleSpec{rev: "r2"}.build(t))
	waitFor(t, "r2 serving", func() bool { return bundleRev(s.Engine().Revision()) == "r2" })
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("r2 took %s to serve: the poll was not held open", d)
	}
}

// rsaKey generates a signing key and returns it with its public key's PEM
// written to a file.
func rsaKey(t *testing.T) (*rsa.PrivateKey, string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bundle.pub.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return k, path
}

// failedReloads reads writ_policy_reloads_total{result="failed"} from the
// admin listener's metrics.
func failedReloads(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := http.Get(s.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, `writ_policy_reloads_total{result="failed"}`) {
			return strings.TrimSpace(strings.TrimPrefix(line, `writ_policy_reloads_total{result="failed"}`))
		}
	}
	t.Fatalf("no writ_policy_reloads_total{result=\"failed\"} in the metrics")
	return ""
}

// refusedNext serves spec's bundle and waits for its refusal: the failed
// reloads count one more, the log says so, the last good revision serves.
func refusedNext(t *testing.T, s *Server, bs *bundleServer, logs *syncbuf.Buffer, spec bundleSpec, why string) {
	t.Helper()
	good := s.Engine().Revision()
	_, before := s.reloader.Counts()
	bs.set(spec.build(t))
	// The refused bundle before it may be fetched and refused again first
	// (OPA's downloader keeps no ETag of a bundle it could not read): wait
	// for this one's refusal, not for any.
	waitFor(t, spec.rev+" refused", func() bool {
		_, f := s.reloader.Counts()
		last := s.reloader.Last()
		return f > before && !last.OK && strings.Contains(last.Error, why)
	})
	if got := s.Engine().Revision(); got != good {
		t.Errorf("%s: revision %q serves, want the last good %q", spec.rev, got, good)
	}
	// Each poll of the refused bundle is one more refusal (OPA's
	// downloader keeps no ETag of a bundle it could not read).
	got := failedReloads(t, s)
	if _, failed := s.reloader.Counts(); got == fmt.Sprint(before) || (got != fmt.Sprint(failed) && got != fmt.Sprint(failed-1)) {
		t.Errorf("%s: writ_policy_reloads_total{result=\"failed\"} %s, want the reloader's %d (was %d)", spec.rev, got, failed, before)
	}
	if last := s.reloader.Last(); last.OK || !strings.Contains(last.Error, why) {
		t.Errorf("%s: last reload %+v, want refused for %q", spec.rev, last, why)
	}
	if !strings.Contains(logs.String(), "policy reload refused") {
		t.Errorf("%s: the refusal is not logged: %s", spec.rev, logs.String())
	}
}

// TestBundleSignatureRefused: with policy_bundle.signing set, a bundle
// signed by another key, one signed for another scope and an unsigned one
// are each refused; the last good policy keeps serving, and the refusal is
// logged and counted as a failed reload.
//
// Threat: whoever can write to the bundle service, or sits between it and
// writ, replaces the policy of every sidecar with one that allows them.
// Defence: every bundle's .signatures.json is verified by OPA's bundle
// reader against the configured key (kid, scope, each file's digest) before
// anything of it is loaded; a bundle that fails is refused whole.
func TestBundleSignatureRefused(t *testing.T) {
	key, pub := rsaKey(t)
	other, _ := rsaKey(t)
	bs := newBundleServer(t, bundleSpec{rev: "r1", key: key, keyID: "writ", claims: `{"scope":"writ"}`}.build(t))
	cfg := bundleConfig(t, bs.url, "", func(b *config.PolicyBundle) {
		b.Signing = &config.BundleSigning{KeyID: "writ", PublicKeyFile: pub, Algorithm: "RS256", Scope: "writ"}
	})
	logs := &syncbuf.Buffer{}
	s, err := New(t.Context(), cfg, WithLogger(textLogger(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	if bundleRev(s.Engine().Revision()) != "r1" {
		t.Fatalf("signed r1 not serving: %q", s.Engine().Revision())
	}
	refusedNext(t, s, bs, logs, bundleSpec{rev: "r2", key: other, keyID: "writ", claims: `{"scope":"writ"}`}, "verification")
	refusedNext(t, s, bs, logs, bundleSpec{rev: "r3", key: key, keyID: "writ", claims: `{"scope":"other"}`}, "scope")
	refusedNext(t, s, bs, logs, bundleSpec{rev: "r4"}, "signatures")
	// And a good one still goes through.
	bs.set(bundleSpec{rev: "r5", key: key, keyID: "writ", claims: `{"scope":"writ"}`}.build(t))
	waitFor(t, "r5 serving", func() bool { return bundleRev(s.Engine().Revision()) == "r5" })
}

// TestBundleFailingTestsRefused: a bundle whose own Rego tests fail is
// refused through the same gate as a local reload.
//
// Threat: a bundle built from a broken commit (its tests failing) reaches
// every sidecar and changes what they allow. Defence: a bundle is activated
// only after its own Rego tests and the configuration's known requests
// pass (authz.LoadPolicyFS through the authz.Reloader).
func TestBundleFailingTestsRefused(t *testing.T) {
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	logs := &syncbuf.Buffer{}
	s, err := New(t.Context(), bundleConfig(t, bs.url, "", nil), WithLogger(textLogger(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	refusedNext(t, s, bs, logs, bundleSpec{rev: "r2", testWants: "not-r2"}, "policy tests failed")
}

// TestBundleOverMaxBytes: a bundle over policy_bundle.max_bytes is refused.
//
// Threat: a bundle service (or whoever answers in its name) sends a huge
// bundle that exhausts the memory of every sidecar. Defence: OPA's reader
// stops at max_bytes for any file of it, and writ refuses a download over
// it, before anything is loaded.
func TestBundleOverMaxBytes(t *testing.T) {
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	logs := &syncbuf.Buffer{}
	s, err := New(t.Context(), bundleConfig(t, bs.url, "", func(b *config.PolicyBundle) { b.MaxBytes = 64 << 10 }), WithLogger(textLogger(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	refusedNext(t, s, bs, logs, bundleSpec{rev: "r2", pad: 256 << 10}, "size")
}

// TestBundleServiceDownAtStart: a writ that served a bundle persisted it;
// another started with the service down serves that bundle; without one
// persisted the start fails, saying why.
//
// Threat: a bundle service outage (or an attacker taking it down) during a
// rollout leaves sidecars unable to start, or starting with no policy.
// Defence: the last good bundle is persisted on disk (after it passed the
// gate) and verified and gated again at start when the service gives none;
// with none persisted the start fails closed.
func TestBundleServiceDownAtStart(t *testing.T) {
	dir := t.TempDir()
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	s, err := New(t.Context(), bundleConfig(t, bs.url, dir, nil), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	bs.set(bundleSpec{rev: "r2"}.build(t))
	waitFor(t, "r2 serving", func() bool { return bundleRev(s.Engine().Revision()) == "r2" })
	want := s.Engine().Revision()
	shutdown(t, s)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/bundles/writ.tar.gz"
	ln.Close() // nothing listens there
	s2, err := New(t.Context(), bundleConfig(t, down, dir, nil), WithLogger(quiet()))
	if err != nil {
		t.Fatalf("start with the service down and a bundle persisted: %v", err)
	}
	if got := s2.Engine().Revision(); got != want {
		t.Errorf("serving %q, want the persisted %q", got, want)
	}
	resp, err := http.Get(s2.AdminURL() + "/v1/policy")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Revision       string `json:"revision"`
		BundleRevision string `json:"bundle_revision"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.BundleRevision != "r2" || st.Revision != want {
		t.Errorf("GET /v1/policy: %+v (%v), want revision %q and bundle_revision r2", st, err, want)
	}
	shutdown(t, s2)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := New(ctx, bundleConfig(t, down, t.TempDir(), nil), WithLogger(quiet())); err == nil ||
		!strings.Contains(err.Error(), "no policy to serve") {
		t.Errorf("start with the service down and nothing persisted: %v, want refused", err)
	}
}

// textLogger logs to w, as text.
func textLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestBundleValidate: writ validate of a policy_bundle: configuration
// checks the persisted bundle when there is one, and with none says so as a
// warning (only a serving writ downloads the policy).
func TestBundleValidate(t *testing.T) {
	dir := t.TempDir()
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	s, err := New(t.Context(), bundleConfig(t, bs.url, dir, nil), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	rev := s.Engine().Revision()
	shutdown(t, s)
	v := Validate(t.Context(), bundleConfig(t, bs.url, dir, nil), ValidateOptions{Offline: true})
	if !strings.Contains(v.Summary, "revision "+rev) {
		t.Errorf("with a bundle persisted: %q %+v", v.Summary, v.Findings)
	}
	v = Validate(t.Context(), bundleConfig(t, bs.url, t.TempDir(), nil), ValidateOptions{Offline: true})
	var warned bool
	for _, f := range v.Findings {
		warned = warned || (f.Kind == "warning" && f.Key == "policy_bundle" && strings.Contains(f.Msg, "no bundle persisted"))
		if f.Kind == "error" {
			t.Errorf("nothing persisted: error %+v", f)
		}
	}
	if !warned || !strings.Contains(v.Summary, "not checked here") {
		t.Errorf("nothing persisted: %q %+v", v.Summary, v.Findings)
	}
}

// shadowSink keeps every shadow disagreement.
type shadowSink struct {
	events.Nop
	mu   sync.Mutex
	seen []events.ShadowDisagreement
}

func (s *shadowSink) ShadowDisagreed(e events.ShadowDisagreement) {
	s.mu.Lock()
	s.seen = append(s.seen, e)
	s.mu.Unlock()
}

// codes are the shadow codes of the disagreements seen so far.
func (s *shadowSink) codes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.seen {
		out = append(out, e.Shadow.Codes...)
	}
	return out
}

// shadowBundleConfig is the seed's configuration (its live policy from
// files) with its shadow set from url, persisted in dir.
func shadowBundleConfig(t *testing.T, url, dir string) *config.Config {
	t.Helper()
	return seed(t, func(c *config.Config) {
		c.PolicyBundleShadow = &config.PolicyBundle{URL: url, PollMin: time.Second, PollMax: time.Second,
			MaxBytes: config.DefaultBundleMaxBytes, StartWait: 5 * time.Second, PersistDir: dir}
	})
}

// TestShadowFromBundle: a shadow set from a bundle service
// (policy_bundle_shadow:) is decided beside the live set from files; the
// service rotating it moves the shadow's revision and never the live one;
// a shadow bundle failing its tests is refused (the last good shadow
// stays); with the service down at start the persisted shadow serves.
func TestShadowFromBundle(t *testing.T) {
	dir := t.TempDir()
	bs := newBundleServer(t, bundleSpec{rev: "r1"}.build(t))
	sink := &shadowSink{}
	s, err := New(t.Context(), shadowBundleConfig(t, bs.url, dir), WithLogger(quiet()), WithEvents(sink))
	if err != nil {
		t.Fatal(err)
	}
	live := s.Engine().Revision()
	if bundleRev(live) != "" || bundleRev(s.shadowRevision()) != "r1" {
		t.Fatalf("live %q, shadow %q: want the files' live set and the bundle's r1 shadow", live, s.shadowRevision())
	}
	send := func() {
		t.Helper()
		resp, err := http.Post(s.URL()+"/", "application/json", strings.NewReader(sendBody))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	seen := func(code string) func() bool {
		return func() bool { send(); return slices.Contains(sink.codes(), code) }
	}
	waitFor(t, "a disagreement of the r1 shadow", seen("rev_r1_r1"))

	bs.set(bundleSpec{rev: "r2"}.build(t))
	waitFor(t, "the r2 shadow", func() bool { return bundleRev(s.shadowRevision()) == "r2" })
	waitFor(t, "a disagreement of the r2 shadow", seen("rev_r2_r2"))
	if got := s.Engine().Revision(); got != live {
		t.Fatalf("the live revision moved from %q to %q with the shadow's bundle", live, got)
	}

	_, before := s.shadowReloader.Counts()
	shadow := s.shadowRevision()
	bs.set(bundleSpec{rev: "r3", testWants: "not-r3"}.build(t))
	waitFor(t, "r3 refused", func() bool { _, f := s.shadowReloader.Counts(); return f > before })
	if last := s.shadowReloader.Last(); last.OK || !strings.Contains(last.Error, "policy tests failed") {
		t.Errorf("the shadow's last reload %+v, want refused for its tests", last)
	}
	if got := s.shadowRevision(); got != shadow {
		t.Errorf("shadow %q after a refused bundle, want the last good %q", got, shadow)
	}
	shutdown(t, s)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/bundles/writ.tar.gz"
	ln.Close() // nothing listens there
	s2, err := New(t.Context(), shadowBundleConfig(t, down, dir), WithLogger(quiet()))
	if err != nil {
		t.Fatalf("start with the shadow's service down and its bundle persisted: %v", err)
	}
	defer shutdown(t, s2)
	if got := s2.shadowRevision(); got != shadow {
		t.Errorf("shadow %q, want the persisted %q", got, shadow)
	}
	v := Validate(t.Context(), shadowBundleConfig(t, down, dir), ValidateOptions{Offline: true})
	if !strings.Contains(v.Summary, "shadow: the policy bundle at "+down+" (revision "+shadow+",") {
		t.Errorf("writ validate: %q %+v", v.Summary, v.Findings)
	}
}
