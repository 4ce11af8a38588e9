package config

import (
	"strings"
	"testing"
	"time"
)

// bundleDoc is good with policies: replaced by a policy_bundle: section.
func bundleDoc(section string) string {
	return strings.Replace(good, "policies: [../policies]\n", section, 1)
}

// TestPolicyBundleDefaults: policy_bundle: with its url alone takes OPA's
// polling defaults, the size bound and RS256 for a signing key.
func TestPolicyBundleDefaults(t *testing.T) {
	c, err := Parse([]byte(bundleDoc("policy_bundle:\n  url: http://bundles.bank.ae/writ/bundle.tar.gz\n  signing: {key_id: writ, public_key_file: k.pem}\n")))
	if err != nil {
		t.Fatal(err)
	}
	b := c.PolicyBundle
	if b.PollMin != 60*time.Second || b.PollMax != 120*time.Second || b.MaxBytes != DefaultBundleMaxBytes ||
		b.StartWait != DefaultBundleStartWait || b.LongPoll != 0 || b.Signing.Algorithm != "RS256" || b.Type != BundleHTTP {
		t.Errorf("defaults: %+v %+v", b, b.Signing)
	}
	if c.EmbeddedPolicies() {
		t.Error("a bundle's policy counted as the embedded one")
	}
}

// TestPolicyBundleValidation: each wrong policy_bundle: value is refused
// with its key and why.
func TestPolicyBundleValidation(t *testing.T) {
	for doc, want := range map[string]string{
		"policies: [../policies]\npolicy_bundle: {url: 'http://b/x.tar.gz'}\n":                                 "policy_bundle: policies: and policy_bundle: are exclusive",
		"policy_bundle: {url: ftp://b/x.tar.gz}\n":                                                             "policy_bundle.url: must be an http(s) URL",
		"policy_bundle: {url: http://b}\n":                                                                     "policy_bundle.url: must name the bundle's path",
		"policy_bundle: {url: http://b/x.tar.gz, poll_min: 1500ms, poll_max: 2s}\n":                            "policy_bundle.poll_min: must be a whole number of seconds",
		"policy_bundle: {url: http://b/x.tar.gz, poll_min: 30s, poll_max: 10s}\n":                              "policy_bundle.poll_max: must be at least poll_min",
		"policy_bundle: {url: http://b/x.tar.gz, long_poll: 500ms}\n":                                          "policy_bundle.long_poll: must be a whole number of seconds",
		"policy_bundle: {url: http://b/x.tar.gz, max_bytes: -1}\n":                                             "policy_bundle.max_bytes: must be positive",
		"policy_bundle: {url: http://b/x.tar.gz, signing: {key_id: writ}}\n":                                   "policy_bundle.signing.public_key_file: required",
		"policy_bundle: {url: http://b/x.tar.gz, signing: {public_key_file: k.pem}}\n":                         "policy_bundle.signing.key_id: required",
		"policy_bundle: {url: http://b/x.tar.gz, signing: {key_id: w, public_key_file: k, algorithm: none}}\n": "policy_bundle.signing.algorithm: must be one of",
		// The shadow's bundle: the same keys, named as its own.
		"policies_shadow: [s]\npolicy_bundle_shadow: {url: 'http://b/x.tar.gz'}\n":                                                             "policy_bundle_shadow: policies_shadow: and policy_bundle_shadow: are exclusive",
		"policy_bundle_shadow: {url: http://b/x.tar.gz, poll_min: 30s, poll_max: 10s}\n":                                                       "policy_bundle_shadow.poll_max: must be at least poll_min",
		"policy_bundle_shadow: {url: http://b/x.tar.gz, signing: {key_id: writ}}\n":                                                            "policy_bundle_shadow.signing.public_key_file: required",
		"policy_bundle: {url: http://b/x.tar.gz, persist_dir: /var/b}\npolicy_bundle_shadow: {url: http://b/y.tar.gz, persist_dir: /var/b/}\n": "policy_bundle_shadow.persist_dir: must differ from policy_bundle.persist_dir",
		// From an OCI registry.
		"policy_bundle: {type: s3, url: http://b/x.tar.gz}\n":                                      "policy_bundle.type: must be http (an OPA bundle service) or oci (an OCI registry), not \"s3\"",
		"policy_bundle: {type: oci, url: 'oci://ghcr.io/acme/writ-policy:v4'}\n":                   "policy_bundle.url: must be an OCI registry's http(s) URL, its repository and a tag or digest",
		"policy_bundle: {type: oci, url: 'https://ghcr.io'}\n":                                     "policy_bundle.url: must be an OCI registry's http(s) URL",
		"policy_bundle: {type: oci, url: 'https://ghcr.io/acme/writ-policy'}\n":                    "policy_bundle.url: must name a tag or digest of acme/writ-policy",
		"policy_bundle: {type: oci, url: 'https://ghcr.io/Acme/writ-policy:v4'}\n":                 "policy_bundle.url: must be an OCI registry's http(s) URL",
		"policy_bundle: {type: oci, url: 'https://ghcr.io/acme/writ-policy@sha256:abc'}\n":         "policy_bundle.url: must be an OCI registry's http(s) URL",
		"policy_bundle: {type: oci, url: 'https://u:p@ghcr.io/acme/writ-policy:v4'}\n":             "without credentials, query or fragment",
		"policy_bundle: {type: oci, url: 'https://ghcr.io/acme/writ-policy:v4', long_poll: 30s}\n": "policy_bundle.long_poll: not with type oci",
		"policy_bundle_shadow: {type: oci, url: 'https://ghcr.io/acme/writ-policy'}\n":             "policy_bundle_shadow.url: must name a tag or digest",
	} {
		_, err := Parse([]byte(bundleDoc(doc)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}

// TestPolicyBundleOCI: type oci takes an image reference after the
// registry's URL, by tag or by digest; the reference is the registry's host
// and the URL's path, as OPA's OCI downloader pulls it.
func TestPolicyBundleOCI(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for url, want := range map[string]string{
		"https://ghcr.io/acme/writ-policy:v4":           "ghcr.io/acme/writ-policy:v4",
		"http://127.0.0.1:5000/writ/policy:latest":      "127.0.0.1:5000/writ/policy:latest",
		"https://registry.bank.ae/fleet/writ@" + digest: "registry.bank.ae/fleet/writ@" + digest,
	} {
		c, err := Parse([]byte(bundleDoc("policy_bundle:\n  type: oci\n  url: '" + url + "'\n")))
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		if c.PolicyBundle.Type != BundleOCI {
			t.Errorf("%s: type %q", url, c.PolicyBundle.Type)
		}
		if ref, err := OCIReference(url); err != nil || ref != want {
			t.Errorf("%s: reference %q (%v), want %q", url, ref, err, want)
		}
	}
}
