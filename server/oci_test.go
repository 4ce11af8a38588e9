package server

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// The media types of an OPA bundle image, as `opa` and oras push one: an
// OCI image manifest whose gzip'd tar layer is the bundle's tarball.
const (
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// ociRegistry is a minimal OCI distribution registry on loopback: the
// endpoints OPA's OCI downloader calls (a manifest resolved by tag with
// HEAD, manifests and blobs fetched by digest with GET), for one
// repository whose tags point at images made of a bundle. down answers
// every request 503.
type ociRegistry struct {
	// base is the registry's URL; repo its one repository.
	base, repo string

	mu        sync.Mutex
	tags      map[string]string // tag: manifest digest
	manifests map[string][]byte // digest: manifest
	blobs     map[string][]byte // digest: blob

	down atomic.Bool
	// resolved counts tag resolutions; layers the bundle layers sent.
	resolved, layers atomic.Int64
}

func newOCIRegistry(t *testing.T) *ociRegistry {
	t.Helper()
	r := &ociRegistry{repo: "writ/policy", tags: map[string]string{}, manifests: map[string][]byte{}, blobs: map[string][]byte{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(r.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.base = "http://" + ln.Addr().String()
	return r
}

// url is policy_bundle.url of the image tag names.
func (r *ociRegistry) url(tag string) string { return r.base + "/" + r.repo + ":" + tag }

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// push stores an image of the bundle tarball and points tag at it, as
// `opa` or oras would push it: an empty config, the tarball its one layer.
func (r *ociRegistry) push(t *testing.T, tag string, tarball []byte) {
	t.Helper()
	cfg := []byte("{}")
	desc := func(mediaType string, b []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": digestOf(b), "size": len(b)}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     ociManifestType,
		"config":        desc(ociConfigType, cfg),
		"layers": []any{map[string]any{"mediaType": ociLayerType, "digest": digestOf(tarball), "size": len(tarball),
			"annotations": map[string]string{"org.opencontainers.image.title": "bundle.tar.gz"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobs[digestOf(cfg)], r.blobs[digestOf(tarball)] = cfg, tarball
	r.manifests[digestOf(manifest)] = manifest
	r.tags[tag] = digestOf(manifest)
}

func (r *ociRegistry) serve(w http.ResponseWriter, req *http.Request) {
	if r.down.Load() {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/v2/"+r.repo+"/")
	kind, ref, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	var body []byte
	var found bool
	contentType := "application/octet-stream"
	switch kind {
	case "manifests":
		if d, tagged := r.tags[ref]; tagged {
			r.resolved.Add(1)
			ref = d
		}
		body, found = r.manifests[ref]
		contentType = ociManifestType
	case "blobs":
		body, found = r.blobs[ref]
		if found && ref != digestOf([]byte("{}")) {
			r.layers.Add(1)
		}
	}
	r.mu.Unlock()
	if !found {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Docker-Content-Digest", ref)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if req.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// ociConfig is the seed's configuration with its policy from the image at
// url in an OCI registry, polled every second, persisted in dir.
func ociConfig(t *testing.T, url, dir string, mutate func(*config.PolicyBundle)) *config.Config {
	t.Helper()
	return bundleConfig(t, url, dir, func(b *config.PolicyBundle) {
		b.Type = config.BundleOCI
		if mutate != nil {
			mutate(b)
		}
	})
}

// TestOCIBundle: writ serves the bundle of an image in an OCI registry
// under the bundle's revision; polls of an unchanged tag load nothing;
// the tag moved to a new image is picked up; the registry answering
// errors is the registry's outage, not a refused bundle (the policy serves
// on, no failed reload); and the downloader's local OCI store is gone
// after Shutdown.
func TestOCIBundle(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the OCI store is made
	reg := newOCIRegistry(t)
	reg.push(t, "v1", bundleSpec{rev: "r1"}.build(t))
	s, err := New(t.Context(), ociConfig(t, reg.url("v1"), t.TempDir(), nil), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	if got := bundleRev(s.Engine().Revision()); got != "r1" {
		t.Fatalf("serving %q, want the image's bundle r1", s.Engine().Revision())
	}
	waitFor(t, "two more resolutions of the tag", func() bool { return reg.resolved.Load() >= 3 })
	if ok, failed := s.reloader.Counts(); ok != 0 || failed != 0 {
		t.Errorf("reloads ok=%d failed=%d while the tag stood still, want none", ok, failed)
	}
	if n := reg.layers.Load(); n != 1 {
		t.Errorf("the bundle layer was pulled %d times, want once", n)
	}

	reg.push(t, "v1", bundleSpec{rev: "r2"}.build(t))
	waitFor(t, "r2 serving", func() bool { return bundleRev(s.Engine().Revision()) == "r2" })

	reg.down.Store(true)
	before := reg.resolved.Load()
	time.Sleep(2500 * time.Millisecond) // polls meet 503s (the downloader backs off from 1s)
	if ok, failed := s.reloader.Counts(); failed != 0 || ok != 1 {
		t.Errorf("reloads ok=%d failed=%d across the registry's outage, want the one of r2 and no failure", ok, failed)
	}
	if got := bundleRev(s.Engine().Revision()); got != "r2" {
		t.Errorf("serving %q during the registry's outage, want r2", s.Engine().Revision())
	}
	if reg.resolved.Load() != before {
		t.Errorf("a tag resolved while the registry was down")
	}
	reg.down.Store(false)
	reg.push(t, "v1", bundleSpec{rev: "r3"}.build(t))
	waitFor(t, "r3 serving after the outage", func() bool { return bundleRev(s.Engine().Revision()) == "r3" })

	shutdown(t, s)
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("after Shutdown the temporary directory holds %v (%v), want the OCI store removed", left, err)
	}
}

// TestOCIBundleSigned: with policy_bundle.signing, an image's bundle
// signed by the key serves; one signed by another key, and an unsigned
// one, are refused (logged, counted, the last good serving); a good one
// after them serves.
//
// Threat: whoever can push to the registry (a leaked CI token, a
// compromised mirror) moves the tag every sidecar pulls to a policy that
// allows them. Defence: the layer's bundle is read by OPA's bundle reader
// with the configured verification (kid, scope, every file's digest)
// exactly as a bundle service's is, and a bundle that fails is refused
// whole before anything of it loads.
func TestOCIBundleSigned(t *testing.T) {
	key, pub := rsaKey(t)
	other, _ := rsaKey(t)
	reg := newOCIRegistry(t)
	signed := func(rev string, k *rsa.PrivateKey) bundleSpec {
		return bundleSpec{rev: rev, key: k, keyID: "writ", claims: `{"scope":"writ"}`}
	}
	reg.push(t, "v1", signed("r1", key).build(t))
	logs := &syncbuf.Buffer{}
	s, err := New(t.Context(), ociConfig(t, reg.url("v1"), "", func(b *config.PolicyBundle) {
		b.Signing = &config.BundleSigning{KeyID: "writ", PublicKeyFile: pub, Algorithm: "RS256", Scope: "writ"}
	}), WithLogger(textLogger(logs)))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	if got := bundleRev(s.Engine().Revision()); got != "r1" {
		t.Fatalf("signed r1 not serving: %q", s.Engine().Revision())
	}
	for _, c := range []struct {
		spec bundleSpec
		why  string
	}{{signed("r2", other), "verification"}, {bundleSpec{rev: "r3"}, "signatures"}} {
		good := s.Engine().Revision()
		_, before := s.reloader.Counts()
		reg.push(t, "v1", c.spec.build(t))
		// The refused bundle before it may be fetched and refused again
		// first (OPA's downloader keeps no ETag of a bundle it could not
		// read): wait for this one's refusal, not for any.
		waitFor(t, c.spec.rev+" refused", func() bool {
			_, f := s.reloader.Counts()
			last := s.reloader.Last()
			return f > before && !last.OK && strings.Contains(last.Error, c.why)
		})
		if got := s.Engine().Revision(); got != good {
			t.Errorf("%s: %q serves, want the last good %q", c.spec.rev, got, good)
		}
		if last := s.reloader.Last(); last.OK || !strings.Contains(last.Error, c.why) {
			t.Errorf("%s: last reload %+v, want refused for %q", c.spec.rev, last, c.why)
		}
	}
	if !strings.Contains(logs.String(), "policy reload refused") {
		t.Errorf("the refusals are not logged: %s", logs.String())
	}
	reg.push(t, "v1", signed("r4", key).build(t))
	waitFor(t, "r4 serving", func() bool { return bundleRev(s.Engine().Revision()) == "r4" })
}

// TestOCIRegistryDownAtStart: a writ that served an image's bundle
// persisted it; another started with the registry down serves it; without
// one persisted the start fails, saying why.
//
// Threat: a registry outage (or an attacker taking it down) during a
// rollout leaves sidecars unable to start, or starting with no policy.
// Defence: the last good bundle is persisted (after the gate) and at start
// read, verified and gated again when the registry gives none; with none
// persisted the start fails closed.
func TestOCIRegistryDownAtStart(t *testing.T) {
	dir := t.TempDir()
	reg := newOCIRegistry(t)
	reg.push(t, "v1", bundleSpec{rev: "r1"}.build(t))
	s, err := New(t.Context(), ociConfig(t, reg.url("v1"), dir, nil), WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	reg.push(t, "v1", bundleSpec{rev: "r2"}.build(t))
	waitFor(t, "r2 serving", func() bool { return bundleRev(s.Engine().Revision()) == "r2" })
	want := s.Engine().Revision()
	shutdown(t, s)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/writ/policy:v1"
	ln.Close() // nothing listens there
	s2, err := New(t.Context(), ociConfig(t, down, dir, nil), WithLogger(quiet()))
	if err != nil {
		t.Fatalf("start with the registry down and a bundle persisted: %v", err)
	}
	if got := s2.Engine().Revision(); got != want {
		t.Errorf("serving %q, want the persisted %q", got, want)
	}
	shutdown(t, s2)

	// A registry that answers, but not with the image, is down all the
	// same for the start.
	reg.down.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := New(ctx, ociConfig(t, reg.url("v1"), t.TempDir(), nil), WithLogger(quiet())); err == nil ||
		!strings.Contains(err.Error(), "no policy to serve") {
		t.Errorf("start with the registry failing and nothing persisted: %v, want refused", err)
	}
}
