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
	"testing/fstest"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/download"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins/rest"
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

func newBundleSource(cfg *config.PolicyBundle, log *slog.Logger) (*bundleSource, error) {
	src := &bundleSource{cfg: cfg, log: log}
	if s := cfg.Signing; s != nil {
		key, err := os.ReadFile(s.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("policy_bundle.signing.public_key_file: %w", err)
		}
		keys := map[string]*bundle.KeyConfig{s.KeyID: {Key: string(key), Algorithm: s.Algorithm, Scope: s.Scope}}
		src.bvc = bundle.NewVerificationConfig(keys, s.KeyID, s.Scope, nil)
		if err := src.bvc.ValidateAndInjectDefaults(keys); err != nil {
			return nil, fmt.Errorf("policy_bundle.signing: %w", err)
		}
	}
	return src, nil
}

// downloader is OPA's downloader of the configured bundle, its updates
// handed to f.
func (b *bundleSource) downloader(f func(context.Context, download.Update) error) (*download.Downloader, error) {
	u, err := url.Parse(b.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("policy_bundle.url: %w", err)
	}
	path := u.Path
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	u.Path, u.RawPath, u.RawQuery = "", "", ""
	restCfg, err := json.Marshal(map[string]any{"url": u.String()})
	if err != nil {
		return nil, err
	}
	// OPA's own log is not writ's: writ logs every update itself (f).
	client, err := rest.New(restCfg, nil, rest.Logger(logging.NewNoOpLogger()))
	if err != nil {
		return nil, fmt.Errorf("policy_bundle: %w", err)
	}
	minS, maxS := int64(b.cfg.PollMin.Seconds()), int64(b.cfg.PollMax.Seconds())
	dc := download.Config{Polling: download.PollingConfig{MinDelaySeconds: &minS, MaxDelaySeconds: &maxS}}
	if b.cfg.LongPoll > 0 {
		lp := int64(b.cfg.LongPoll.Seconds())
		dc.Polling.LongPollingTimeoutSeconds = &lp
	}
	if err := dc.ValidateAndInjectDefaults(); err != nil {
		return nil, fmt.Errorf("policy_bundle: %w", err)
	}
	d := download.New(dc, client, strings.TrimPrefix(path, "/")).
		WithCallback(f).
		WithSizeLimitBytes(b.cfg.MaxBytes).
		WithBundlePersistence(true) // the raw tarball, to persist once it has passed
	if b.bvc != nil {
		d = d.WithBundleVerificationConfig(b.bvc)
	}
	return d, nil
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
		b.log.Warn("policy bundle service unavailable; the last good policy keeps serving", "url", b.cfg.URL, "error", u.Error)
		return false
	case u.Error != nil:
		c.err = fmt.Errorf("policy bundle refused: %w", u.Error)
	case u.Bundle == nil:
		return false // 304 Not Modified: the bundle serving is the service's
	case int64(u.Size) > b.cfg.MaxBytes:
		c.b, c.err = nil, fmt.Errorf("policy bundle refused: %d bytes, over policy_bundle.max_bytes (%d)", u.Size, b.cfg.MaxBytes)
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
// answer, an error status) rather than the bundle's.
func unavailable(err error) bool {
	var h download.HTTPError
	var u *url.Error
	return errors.As(err, &h) || errors.As(err, &u)
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
		return false, fmt.Errorf("the persisted policy bundle: %d bytes, over policy_bundle.max_bytes", len(raw))
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

// bundleSourceDesc names policy_bundle's source for logs and messages.
func bundleSourceDesc(cfg *config.PolicyBundle) string { return "the policy bundle at " + cfg.URL }

// firstBundle is the policy a writ with policy_bundle: starts with: the
// service's bundle (one download, within start_wait), else the bundle
// persisted in persist_dir; each through the gate of opt. Neither: the
// start fails, saying why.
func (s *Server) firstBundle(ctx context.Context, opt authz.LoadOptions) (*authz.Policy, error) {
	src, err := newBundleSource(s.cfg.PolicyBundle, s.log)
	if err != nil {
		return nil, err
	}
	dl, err := src.downloader(s.onBundle)
	if err != nil {
		return nil, err
	}
	s.bundle, s.downloader = src, dl
	wctx, cancel := context.WithTimeout(ctx, s.cfg.PolicyBundle.StartWait)
	_ = dl.Trigger(wctx) // its update went to onBundle (no reloader yet: offered only)
	cancel()
	p, err := src.load(ctx, opt)
	if err == nil {
		if perr := src.persist(); perr != nil {
			s.errs.inc(componentPolicyBundle)
			s.log.Error("the policy bundle could not be persisted", "dir", s.cfg.PolicyBundle.PersistDir, "error", perr)
		}
		return p, nil
	}
	s.log.Warn("no policy bundle from the service at start; trying the persisted one", "url", s.cfg.PolicyBundle.URL, "error", err)
	ok, perr := src.readPersisted()
	if perr == nil && !ok {
		perr = errors.New("none persisted (policy_bundle.persist_dir)")
	}
	if perr == nil {
		if p, perr = src.load(ctx, opt); perr == nil {
			s.log.Warn("serving the persisted policy bundle until the service gives a new one", "policy_revision", p.Revision)
			return p, nil
		}
	}
	return nil, fmt.Errorf("policy_bundle: no policy to serve: from %s: %v; the persisted bundle: %w", s.cfg.PolicyBundle.URL, err, perr)
}

// onBundle is OPA's downloader's callback: a bundle downloaded (or refused
// on reading) is offered to the source and, once writ serves, goes through
// the reloader's gate; one that passed is persisted. Its errors are the
// reloader's to log and count (writ_policy_reloads_total{result="failed"}):
// the downloader is told none, so it keeps its rhythm (and the refused
// bundle's ETag: the same bundle is not fetched and refused again).
func (s *Server) onBundle(ctx context.Context, u download.Update) error {
	if !s.bundle.offer(u) || !s.bundleLive.Load() {
		return nil
	}
	if err := s.reloader.Reload(ctx); err != nil {
		return nil //nolint:nilerr // logged and counted by the reloader
	}
	if err := s.bundle.persist(); err != nil {
		s.errs.inc(componentPolicyBundle)
		s.log.Error("the policy bundle could not be persisted", "dir", s.cfg.PolicyBundle.PersistDir, "error", err)
	}
	return nil
}
