package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"oras.land/oras-go/v2/registry"
)

// The kinds of bundle source (policy_bundle.type).
const (
	// BundleHTTP is an OPA bundle service: the bundle's tarball at an
	// http(s) URL, polled with its ETag.
	BundleHTTP = "http"
	// BundleOCI is an OCI registry: the bundle is the gzip'd tarball layer
	// of the image a tag or digest names.
	BundleOCI = "oci"
)

// Defaults of policy_bundle: (OPA's bundle plugin's polling defaults).
const (
	DefaultBundleMinPoll  = 60 * time.Second
	DefaultBundleMaxPoll  = 120 * time.Second
	DefaultBundleMaxBytes = 32 << 20
	// DefaultBundleStartWait bounds the first download at start.
	DefaultBundleStartWait = 10 * time.Second
	// DefaultBundleAlgorithm is the signing algorithm `opa build
	// --signing-key` uses unless told otherwise.
	DefaultBundleAlgorithm = "RS256"
)

// PolicyBundle takes the policy set from an OPA bundle service instead of
// policies: (docs/fleet.md#policy-from-bundles).
type PolicyBundle struct {
	// Type is where the bundle comes from: "http" (the default), an OPA
	// bundle service; "oci", an OCI registry.
	Type string `yaml:"type"`
	// URL is the bundle's http(s) URL on the bundle service; with type oci,
	// the registry's http(s) URL followed by the repository and a tag or
	// digest (https://ghcr.io/acme/writ-policy:v4): the scheme says how to
	// reach the registry, the rest is the image reference.
	URL string `yaml:"url"`
	// PollMin and PollMax bound the jittered wait between two polls
	// (defaults 60s and 120s; whole seconds, as OPA's downloader counts).
	PollMin time.Duration `yaml:"poll_min"`
	PollMax time.Duration `yaml:"poll_max"`
	// LongPoll, when set, asks the service to hold a poll until the bundle
	// changes or this long has passed (OPA's long-polling; whole seconds;
	// not with type oci: a registry does not hold polls).
	LongPoll time.Duration `yaml:"long_poll"`
	// MaxBytes refuses a bundle whose download, or any file of which, is
	// larger (default 32 MiB).
	MaxBytes int64 `yaml:"max_bytes"`
	// StartWait bounds the first download at start (default 10s); after it
	// the bundle persisted in persist_dir serves.
	StartWait time.Duration `yaml:"start_wait"`
	// Signing, when set, requires every bundle to be signed by its key.
	Signing *BundleSigning `yaml:"signing"`
	// PersistDir keeps the last good bundle, served at start when the
	// service cannot give one.
	PersistDir string `yaml:"persist_dir" writ:"path"`
}

// BundleSigning is the key a bundle's .signatures.json must verify with.
type BundleSigning struct {
	// KeyID is the key's id: the signature's kid must name it (unless the
	// signature names none).
	KeyID string `yaml:"key_id"`
	// PublicKeyFile holds the PEM public key (or, for HS256, the secret).
	PublicKeyFile string `yaml:"public_key_file" writ:"path"`
	// Algorithm is the signature's algorithm (default RS256).
	Algorithm string `yaml:"algorithm"`
	// Scope, when set, must equal the signature's scope claim.
	Scope string `yaml:"scope"`
}

func (b *PolicyBundle) applyDefaults() {
	if b == nil {
		return
	}
	if b.Type == "" {
		b.Type = BundleHTTP
	}
	if b.PollMin == 0 {
		b.PollMin = DefaultBundleMinPoll
	}
	if b.PollMax == 0 {
		b.PollMax = max(DefaultBundleMaxPoll, b.PollMin)
	}
	if b.MaxBytes == 0 {
		b.MaxBytes = DefaultBundleMaxBytes
	}
	if b.StartWait == 0 {
		b.StartWait = DefaultBundleStartWait
	}
	if b.Signing != nil && b.Signing.Algorithm == "" {
		b.Signing.Algorithm = DefaultBundleAlgorithm
	}
}

// bundleAlgorithms are the algorithms OPA verifies bundle signatures with.
var bundleAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "HS256", "HS384", "HS512"}

// validate checks a bundle's keys, named under key (policy_bundle or
// policy_bundle_shadow); files says whether the set's local files key
// (filesKey) is given as well.
func (b *PolicyBundle) validate(key, filesKey string, files bool, bad func(key, format string, args ...any)) {
	if b == nil {
		return
	}
	if files {
		bad(key, "%s: and %s: are exclusive: the set comes from local files or from a bundle service, not both", filesKey, key)
	}
	switch b.Type {
	case BundleHTTP, "": // "": a configuration built in code, not loaded
		if u, err := url.Parse(b.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key+".url", "must be an http(s) URL of a bundle, not %q", b.URL)
		} else if u.Path == "" || u.Path == "/" {
			bad(key+".url", "must name the bundle's path on the service (http://host/bundles/writ.tar.gz), not %q", b.URL)
		}
	case BundleOCI:
		if _, err := OCIReference(b.URL); err != nil {
			bad(key+".url", "%v", err)
		}
		if b.LongPoll != 0 {
			bad(key+".long_poll", "not with type oci: a registry does not hold polls (poll_min and poll_max set the rhythm)")
		}
	default:
		bad(key+".type", "must be http (an OPA bundle service) or oci (an OCI registry), not %q", b.Type)
	}
	for key, d := range map[string]time.Duration{key + ".poll_min": b.PollMin, key + ".poll_max": b.PollMax} {
		if d < time.Second || d%time.Second != 0 {
			bad(key, "must be a whole number of seconds, at least 1s, not %s", d)
		}
	}
	if b.PollMax < b.PollMin {
		bad(key+".poll_max", "must be at least poll_min (%s), not %s", b.PollMin, b.PollMax)
	}
	if b.LongPoll < 0 || b.LongPoll%time.Second != 0 {
		bad(key+".long_poll", "must be a whole number of seconds (0: off), not %s", b.LongPoll)
	}
	if b.MaxBytes < 1 {
		bad(key+".max_bytes", "must be positive, not %d", b.MaxBytes)
	}
	if b.StartWait < 0 {
		bad(key+".start_wait", "must be positive")
	}
	if s := b.Signing; s != nil {
		if strings.TrimSpace(s.PublicKeyFile) == "" {
			bad(key+".signing.public_key_file", "required: the key signed bundles verify with")
		}
		if strings.TrimSpace(s.KeyID) == "" {
			bad(key+".signing.key_id", "required: the id of the key (the signature's kid)")
		}
		ok := false
		for _, a := range bundleAlgorithms {
			ok = ok || a == s.Algorithm
		}
		if !ok {
			bad(key+".signing.algorithm", "must be one of %s, not %q", strings.Join(bundleAlgorithms, ", "), s.Algorithm)
		}
	}
	if strings.TrimSpace(b.PersistDir) != b.PersistDir {
		bad(key+".persist_dir", "%q: must name a directory, without surrounding spaces", b.PersistDir)
	}
}

// OCIReference is the image reference of an OCI bundle's url
// (https://ghcr.io/acme/writ-policy:v4 gives ghcr.io/acme/writ-policy:v4),
// checked with the parser OPA's OCI downloader reads it with (oras's), so
// that what loads here is what the downloader pulls: the registry is the
// URL's host, and a tag or a digest is required (a bare repository names no
// image).
func OCIReference(raw string) (string, error) {
	const form = "an OCI registry's http(s) URL, its repository and a tag or digest (https://ghcr.io/acme/writ-policy:v4)"
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("must be %s, not %q", form, raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("must be %s, without credentials, query or fragment, not %q", form, raw)
	}
	ref := u.Host + u.Path
	r, err := registry.ParseReference(ref)
	if err != nil || strings.Trim(u.Path, "/") == "" {
		return "", fmt.Errorf("must be %s, not %q", form, raw)
	}
	if r.Reference == "" {
		return "", fmt.Errorf("must name a tag or digest of %s (%s:v4 or %s@sha256:...), not the bare repository %q", r.Repository, raw, raw, raw)
	}
	return ref, nil
}
