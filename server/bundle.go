package server

// Policy from bundles (policy_bundle:, docs/fleet.md#policy-from-bundles).
//
// What is OPA's and what is writ's: the download (polling with jitter,
// ETag / If-None-Match, OPA's long-polling, backoff on errors) is OPA's
// v1/download.Downloader over its v1/plugins/rest client; reading the
// tarball, its per-file size limit and the verification of
// .signatures.json (the signature, the key id, the scope, every file's
// digest) are OPA's v1/bundle.Reader with a bundle.VerificationConfig. writ
// parses no tarball and verifies no signature of its own: that machinery
// is what every OPA bundle server and `opa build --signing-key` are tested
// against, and a second implementation would be a second place to get it
// wrong. writ's part is what comes after a bundle is read and verified: the
// bundle's modules and data are handed to authz as one set (LoadPolicyFS),
// through the same gate as a local reload (the set's own Rego tests, the
// configuration's known requests and rules), by the same authz.Reloader, so
// a refused bundle is logged, counted as a failed reload and leaves the last
// good policy serving; and a bundle that passed is persisted so that a writ
// started while the service is down serves it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
	"oras.land/oras-go/v2"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
)

// persistedBundle is the file in persist_dir that holds the last good bundle
// (the tarball as the service sent it, signature and all).
const persistedBundle = "bundle.tar.gz"

// bundleName names a bundle's files in Policy.Files, logs and errors.
const bundleName = "bundle"

// bundleSource is the policy source of policy_bundle: the latest bundle
// downloaded (or the error its download met), which its Reloader loads.
type bundleSource struct {
	// key names the set's configuration key (policy_bundle or
	// policy_bundle_shadow) in errors and logs.
	key string
	cfg *config.PolicyBundle
	bvc *bundle.VerificationConfig // nil: bundles need not be signed
	log *slog.Logger

	mu   sync.Mutex
	cand bundleCandidate
}

// bundleCandidate is one downloaded bundle, or why there is none.
type bundleCandidate struct {
	b   *bundle.Bundle
	raw []byte
	err error
}

func newBundleSource(key string, cfg *config.PolicyBundle, log *slog.Logger) (*bundleSource, error) {
	src := &bundleSource{key: key, cfg: cfg, log: log}
	if s := cfg.Signing; s != nil {
		key, err := os.ReadFile(s.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.signing.public_key_file: %w", src.key, err)
		}
		keys := map[string]*bundle.KeyConfig{s.KeyID: {Key: string(key), Algorithm: s.Algorithm, Scope: s.Scope}}
		src.bvc = bundle.NewVerificationConfig(keys, s.KeyID, s.Scope, nil)
		if err := src.bvc.ValidateAndInjectDefaults(keys); err != nil {
			return nil, fmt.Errorf("%s.signing: %w", src.key, err)
		}
	}
	return src, nil
}

// bundleDownloader is what a feed needs of OPA's downloaders: the
// bundle service's (download.Downloader) and the OCI registry's
// (download.OCIDownloader) both are one.
type bundleDownloader interface {
	// Trigger downloads once, its update handed to the callback.
	Trigger(ctx context.Context) error
	// Start polls until Stop.
	Start(ctx context.Context)
	Stop(ctx context.Context)
}

var (
	_ bundleDownloader = (*download.Downloader)(nil)
	_ bundleDownloader = (*download.OCIDownloader)(nil)
)

// downloader is OPA's downloader of the configured bundle, its updates
// handed to f: its bundle service's, or with type oci its OCI registry's.
// OCI's keeps the pulled image in a local OCI store: done removes it (call
// it once the downloader has stopped).
func (b *bundleSource) downloader(f func(context.Context, download.Update) error) (d bundleDownloader, done func() error, err error) {
	done = func() error { return nil }
	minS, maxS := int64(b.cfg.PollMin.Seconds()), int64(b.cfg.PollMax.Seconds())
	dc := download.Config{Polling: download.PollingConfig{MinDelaySeconds: &minS, MaxDelaySeconds: &maxS}}
	if b.cfg.LongPoll > 0 {
		lp := int64(b.cfg.LongPoll.Seconds())
		dc.Polling.LongPollingTimeoutSeconds = &lp
	}
	if err := dc.ValidateAndInjectDefaults(); err != nil {
		return nil, done, fmt.Errorf("%s: %w", b.key, err)
	}
	if b.cfg.Type == config.BundleOCI {
		return b.ociDownloader(dc, f)
	}
	u, err := url.Parse(b.cfg.URL)
	if err != nil {
		return nil, done, fmt.Errorf("%s.url: %w", b.key, err)
	}
	path := u.Path
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	u.Path, u.RawPath, u.RawQuery = "", "", ""
	client, err := b.client(u.String(), "")
	if err != nil {
		return nil, done, err
	}
	hd := download.New(dc, client, strings.TrimPrefix(path, "/")).
		WithCallback(f).
		WithSizeLimitBytes(b.cfg.MaxBytes).
		WithBundlePersistence(true) // the raw tarball, to persist once it has passed
	if b.bvc != nil {
		hd = hd.WithBundleVerificationConfig(b.bvc)
	}
	return hd, done, nil
}

// ociDownloader is OPA's OCI downloader of the configured image
// (download.NewOCI, as OPA's bundle plugin makes it for a service of type
// oci): it resolves the tag at every poll, pulls the manifest and its
// blobs by digest into a local OCI store, and reads the gzip'd tarball
// layer with the same bundle reader, size limit and verification as the
// bundle service's downloader. The layer's digest is its ETag: an
// unchanged image is no update.
func (b *bundleSource) ociDownloader(dc download.Config, f func(context.Context, download.Update) error) (bundleDownloader, func() error, error) {
	none := func() error { return nil }
	ref, err := config.OCIReference(b.cfg.URL)
	if err != nil {
		return nil, none, fmt.Errorf("%s.url: %w", b.key, err)
	}
	u, err := url.Parse(b.cfg.URL)
	if err != nil {
		return nil, none, fmt.Errorf("%s.url: %w", b.key, err)
	}
	client, err := b.client(u.Scheme+"://"+u.Host, config.BundleOCI)
	if err != nil {
		return nil, none, err
	}
	// The store is writ's own temporary directory (not OPA's default, which
	// it creates with a panic on failure): made here, its error returned,
	// and removed when the feed stops. The last good bundle is persisted
	// as a tarball in persist_dir like a bundle service's, so the store
	// need not outlive the process.
	store, err := os.MkdirTemp("", "writ-oci-*")
	if err != nil {
		return nil, none, fmt.Errorf("%s: the OCI store: %w", b.key, err)
	}
	d := download.NewOCI(dc, client, ref, store).
		WithCallback(f).
		WithSizeLimitBytes(b.cfg.MaxBytes).
		WithBundlePersistence(true)
	if b.bvc != nil {
		d = d.WithBundleVerificationConfig(b.bvc)
	}
	return d, func() error { return os.RemoveAll(store) }, nil
}

// client is OPA's REST client of the service at base (typ: its service
// type, "" or oci).
func (b *bundleSource) client(base, typ string) (rest.Client, error) {
	restCfg, err := json.Marshal(map[string]any{"url": base, "type": typ})
	if err != nil {
		return rest.Client{}, err
	}
	// OPA's own log is not writ's: writ logs every update itself (f).
	client, err := rest.New(restCfg, nil, rest.Logger(logging.NewNoOpLogger()))
	if err != nil {
		return rest.Client{}, fmt.Errorf("%s: %w", b.key, err)
	}
	return client, nil
}

// offer records a download's update as the candidate the next load reads:
// a bundle, or the error that refused one. It reports whether there is
// something to load (a 304 or an empty answer has nothing).
func (b *bundleSource) offer(u download.Update) bool {
	c := bundleCandidate{b: u.Bundle, err: u.Error}
	switch {
	case u.Error != nil && unavailable(u.Error):
		// The service did not answer with a bundle: nothing was refused,
		// the last good policy simply keeps serving.
		b.log.Warn("policy bundle service unavailable; the last good policy keeps serving", "key", b.key, "url", b.cfg.URL, "error", u.Error)
		return false
	case u.Error != nil:
		c.err = fmt.Errorf("policy bundle refused: %w", u.Error)
	case u.Bundle == nil:
		return false // 304 Not Modified: the bundle serving is the service's
	case int64(u.Size) > b.cfg.MaxBytes:
		c.b, c.err = nil, fmt.Errorf("policy bundle refused: %d bytes, over %s.max_bytes (%d)", u.Size, b.key, b.cfg.MaxBytes)
	case u.Raw != nil:
		raw, err := io.ReadAll(u.Raw)
		if err != nil {
			c.b, c.err = nil, fmt.Errorf("policy bundle: %w", err)
		}
		c.raw = raw
	}
	b.mu.Lock()
	b.cand = c
	b.mu.Unlock()
	return true
}

// unavailable reports whether a download error is the service's (no
// answer, an error status) rather than the bundle's. For a registry, the
// pull's errors on the registry's side (oras's CopyError of origin source:
// the tag does not resolve, a manifest or blob cannot be fetched) are its;
// content that fails its digest on arrival (origin destination), a
// manifest without a bundle layer and a bundle its reader refuses are the
// bundle's.
func unavailable(err error) bool {
	var h download.HTTPError
	var u *url.Error
	var c *oras.CopyError
	return errors.As(err, &h) || errors.As(err, &u) || (errors.As(err, &c) && c.Origin == oras.CopyErrorOriginSource)
}

// load builds the policy of the latest candidate, through authz's gate
// (opt: tests, known requests, rules). The authz.Reloader calls it.
func (b *bundleSource) load(ctx context.Context, opt authz.LoadOptions) (*authz.Policy, error) {
	b.mu.Lock()
	c := b.cand
	b.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if c.b == nil {
		return nil, errors.New("no policy bundle downloaded yet")
	}
	return bundlePolicy(ctx, c.b, opt)
}

// bundlePolicy hands a bundle's modules and data to authz as one set: an
// in-memory fs.FS for authz.LoadPolicyFS (fstest.MapFS is the standard
// library's map-backed fs.FS; it imports no part of package testing).
func bundlePolicy(ctx context.Context, b *bundle.Bundle, opt authz.LoadOptions) (*authz.Policy, error) {
	fsys := fstest.MapFS{}
	for _, m := range b.Modules {
		name := strings.TrimPrefix(filepath.ToSlash(m.Path), "/")
		if name == "" || !strings.HasSuffix(name, ".rego") {
			return nil, fmt.Errorf("policy bundle: a module named %q", m.Path)
		}
		fsys[name] = &fstest.MapFile{Data: m.Raw, Mode: 0o644}
	}
	if len(b.Data) > 0 {
		raw, err := json.Marshal(b.Data)
		if err != nil {
			return nil, fmt.Errorf("policy bundle data: %w", err)
		}
		fsys["data.json"] = &fstest.MapFile{Data: raw, Mode: 0o644}
	}
	opt.BundleRevision = b.Manifest.Revision
	if opt.BundleRevision == "" {
		opt.BundleRevision = "unrevised" // still says the set is a bundle's
	}
	return authz.LoadPolicyFS(ctx, fsys, bundleName, opt)
}

// persist keeps the candidate's tarball as the last good bundle (written
// beside and renamed over, so a crash leaves the old one or the new one).
func (b *bundleSource) persist() error {
	if b.cfg.PersistDir == "" {
		return nil
	}
	b.mu.Lock()
	raw := b.cand.raw
	b.mu.Unlock()
	if raw == nil {
		return nil
	}
	if err := os.MkdirAll(b.cfg.PersistDir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(b.cfg.PersistDir, ".bundle-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(raw)
	serr := tmp.Sync()
	if err := errors.Join(werr, serr, tmp.Close()); err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	return os.Rename(tmp.Name(), filepath.Join(b.cfg.PersistDir, persistedBundle))
}

// readPersisted reads the bundle persisted in persist_dir as the
// candidate, with the same reader, limit and verification as a download
// (a file tampered with on disk is refused like a bundle from the wire).
// It reports false when nothing is persisted.
func (b *bundleSource) readPersisted() (bool, error) {
	if b.cfg.PersistDir == "" {
		return false, nil
	}
	raw, err := os.ReadFile(filepath.Join(b.cfg.PersistDir, persistedBundle))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the persisted policy bundle: %w", err)
	}
	if int64(len(raw)) > b.cfg.MaxBytes {
		return false, fmt.Errorf("the persisted policy bundle: %d bytes, over %s.max_bytes", len(raw), b.key)
	}
	r := bundle.NewCustomReader(bundle.NewTarballLoader(bytes.NewReader(raw)).WithSizeLimitBytes(b.cfg.MaxBytes)).
		WithSizeLimitBytes(b.cfg.MaxBytes)
	if b.bvc != nil {
		r = r.WithBundleVerificationConfig(b.bvc)
	}
	bu, err := r.Read()
	if err != nil {
		return false, fmt.Errorf("the persisted policy bundle: %w", err)
	}
	b.mu.Lock()
	b.cand = bundleCandidate{b: &bu}
	b.mu.Unlock()
	return true, nil
}

// bundleSourceDesc names a bundle set's source for logs and messages.
func bundleSourceDesc(cfg *config.PolicyBundle) string { return "the policy bundle at " + cfg.URL }

// bundleFeed is one policy set fed by a bundle service: the live set
// (policy_bundle:) or the shadow (policy_bundle_shadow:). Its source holds
// the latest download, OPA's downloader polls the service, and once the
// set's reloader exists and the feed is live every update goes through
// the reloader's gate.
type bundleFeed struct {
	src *bundleSource
	dl  bundleDownloader
	// done cleans up after dl once it has stopped (its OCI store).
	done func() error
	// reloader is the set's; set by the caller of firstBundle once the
	// set's engine exists.
	reloader *authz.Reloader
	// live is set once the reloader exists and the downloader polls:
	// before, an update (the start's one download) is only offered.
	live atomic.Bool

	stopOnce sync.Once
	stopErr  error
}

// start makes the feed live and starts its polling (until stop).
func (f *bundleFeed) start() {
	if f == nil {
		return
	}
	f.live.Store(true)
	f.dl.Start(context.Background())
}

// stop stops the feed's polling (OPA's downloaders wait for a poll loop
// that was started: a feed that never went live has none) and removes what
// its downloader kept. Calls after the first return its result.
func (f *bundleFeed) stop(ctx context.Context) error {
	if f == nil {
		return nil
	}
	f.stopOnce.Do(func() {
		if f.live.Load() {
			f.dl.Stop(ctx)
		}
		if err := f.done(); err != nil {
			f.stopErr = fmt.Errorf("%s: %w", f.src.key, err)
		}
	})
	return f.stopErr
}

// firstBundle starts the feed of the bundle set under key (cfg its
// configuration) and returns the policy it starts with: the service's
// bundle (one download, within start_wait), else the bundle persisted in
// persist_dir; each through the gate of opt. Neither: the start fails,
// saying why.
func (s *Server) firstBundle(ctx context.Context, key string, cfg *config.PolicyBundle, opt authz.LoadOptions) (*bundleFeed, *authz.Policy, error) {
	src, err := newBundleSource(key, cfg, s.log)
	if err != nil {
		return nil, nil, err
	}
	f := &bundleFeed{src: src}
	if f.dl, f.done, err = src.downloader(func(ctx context.Context, u download.Update) error { return s.onBundle(ctx, f, u) }); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartWait)
	_ = f.dl.Trigger(wctx) // its update went to onBundle (not live yet: offered only)
	cancel()
	p, err := s.firstPolicy(ctx, f, opt)
	if err != nil {
		return nil, nil, errors.Join(err, f.stop(ctx))
	}
	// A start that fails later stops the feed with the other parts
	// (Shutdown stops it first of all; stop runs once).
	s.started(componentPolicyBundle, f.stop)
	return f, p, nil
}

// firstPolicy is the policy feed f starts with: its start's download, else
// the bundle persisted.
func (s *Server) firstPolicy(ctx context.Context, f *bundleFeed, opt authz.LoadOptions) (*authz.Policy, error) {
	src, key, cfg := f.src, f.src.key, f.src.cfg
	p, err := src.load(ctx, opt)
	if err == nil {
		s.persistBundle(f)
		return p, nil
	}
	s.log.Warn("no policy bundle from the service at start; trying the persisted one", "key", key, "url", cfg.URL, "error", err)
	ok, perr := src.readPersisted()
	if perr == nil && !ok {
		perr = fmt.Errorf("none persisted (%s.persist_dir)", key)
	}
	if perr == nil {
		if p, perr = src.load(ctx, opt); perr == nil {
			s.log.Warn("serving the persisted policy bundle until the service gives a new one", "key", key, "policy_revision", p.Revision)
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s: no policy to serve: from %s: %w; the persisted bundle: %w", key, cfg.URL, err, perr)
}

// onBundle is OPA's downloader's callback for feed f: a bundle downloaded
// (or refused on reading) is offered to the source and, once the feed is
// live, goes through the set's reloader's gate; one that passed is
// persisted. Its errors are the reloader's to log and count
// (writ_policy_reloads_total{result="failed"}): the downloader is told
// none, so it keeps its rhythm.
func (s *Server) onBundle(ctx context.Context, f *bundleFeed, u download.Update) error {
	if !f.src.offer(u) || !f.live.Load() {
		return nil
	}
	if err := f.reloader.Reload(ctx); err != nil {
		return nil //nolint:nilerr // logged and counted by the reloader
	}
	s.persistBundle(f)
	return nil
}

// persistBundle keeps f's bundle that just passed; a failure is logged and
// counted (the set serves on, but a restart while the service is down
// would not find it).
func (s *Server) persistBundle(f *bundleFeed) {
	if err := f.src.persist(); err != nil {
		s.errs.inc(componentPolicyBundle)
		s.log.Error("the policy bundle could not be persisted", "key", f.src.key, "dir", f.src.cfg.PersistDir, "error", err)
	}
}
