package proxy

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy/push"
)

// Card signatures: writ signs every card it serves with its own key (it
// rewrites the agent's card, so the agent's signature would not verify),
// and checks the signatures of a card an agent serves before it reads it.
// The edge says where a card keeps its signatures and what content they
// cover (adapters.SignedCards); the keys, the network and the cryptography
// are here.

// JWKSPath is where writ serves the key set of its card signatures, on
// every host: the jku of every card writ signs names it.
const JWKSPath = "/.well-known/writ/jwks.json"

// maxJWKSBytes bounds a key set fetched for an agent's card signature.
const maxJWKSBytes = 64 << 10

// cardAlgs are the algorithms a signature on an agent's card may use: the
// asymmetric ones (a shared secret is no one's published key).
var cardAlgs = []jose.SignatureAlgorithm{
	jose.ES256, jose.ES384, jose.ES512, jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
}

// cardKey is writ's own card signing key.
type cardKey struct {
	priv *ecdsa.PrivateKey
	kid  string // the RFC 7638 thumbprint of its public key
	jwks []byte // the key set served at JWKSPath
}

// loadCardKey reads writ's card signing key at path (cards.signing_key_file),
// or generates one and writes it there (0600, its directory 0700) when the
// file does not exist; an empty path is a key that lives in memory only. A
// key file others may read is refused: whoever reads it signs cards that
// writ's callers trust.
func loadCardKey(path string) (*cardKey, error) {
	if path == "" {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("cards: generating the signing key: %w", err)
		}
		return newCardKey(priv)
	}
	priv, err := readCardKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		priv, err = createCardKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("cards.signing_key_file: %w", err)
	}
	return newCardKey(priv)
}

// CheckCardSigningKey checks the key at path (cards.signing_key_file) as
// writ serve would read it, without creating one: a missing file is fine
// (writ serve generates it), a file others may read or that holds no EC
// P-256 private key is not. writ validate calls it.
func CheckCardSigningKey(path string) error {
	if _, err := readCardKey(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cards.signing_key_file: %w", err)
	}
	return nil
}

// readCardKey reads an ES256 private key (a JWK) that only its owner may read.
func readCardKey(path string) (*ecdsa.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by others (mode %04o): chmod 600 it", path, info.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := jwk.Key.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: not an EC P-256 private key (ES256)", path)
	}
	return priv, nil
}

// createCardKey generates a key and writes it to path; when another writ
// wrote one first (O_EXCL), that one is read instead, so both keep one key.
func createCardKey(path string) (*ecdsa.PrivateKey, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(jose.JSONWebKey{Key: priv, Algorithm: string(jose.ES256), Use: "sig"})
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readCardKey(path)
	}
	if err != nil {
		return nil, err
	}
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return priv, nil
}

func newCardKey(priv *ecdsa.PrivateKey) (*cardKey, error) {
	// The kid is the key's RFC 7638 thumbprint: a new key gets a new kid.
	thumb, err := (&jose.JSONWebKey{Key: &priv.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("cards: signing key: %w", err)
	}
	k := &cardKey{priv: priv, kid: base64.RawURLEncoding.EncodeToString(thumb)}
	k.jwks, err = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &priv.PublicKey, KeyID: k.kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, fmt.Errorf("cards: signing key: %w", err)
	}
	return k, nil
}

// signer is a wire.Signer with the key: a detached ES256 JWS whose protected
// header names the key (kid), where its key set is (jku, an absolute URL)
// and typ JOSE, as A2A §8.4.2 asks.
func (k *cardKey) signer(jku string) (wire.Signer, error) {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.priv},
		(&jose.SignerOptions{}).WithType("JOSE").WithHeader("kid", k.kid).WithHeader("jku", jku))
	if err != nil {
		return nil, fmt.Errorf("cards: signer: %w", err)
	}
	return func(content []byte) (wire.Signature, error) {
		obj, err := s.Sign(content)
		if err != nil {
			return wire.Signature{}, err
		}
		compact, err := obj.DetachedCompactSerialize()
		if err != nil {
			return wire.Signature{}, err
		}
		protected, sig, ok := strings.Cut(compact, "..")
		if !ok {
			return wire.Signature{}, errors.New("cards: a detached JWS without its empty payload")
		}
		return wire.Signature{Protected: protected, Signature: sig}, nil
	}, nil
}

// jkuOf is the jku of the cards served under base (a route's public base
// URL): JWKSPath at base's origin, where writ answers it.
func jkuOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("cards: the public URL %q has no host for the jku", base)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: JWKSPath}).String(), nil
}

// LoadCardKeys reads a JWKS file of public keys (agents[].card_keys): the
// only keys an agent's card may be signed with. Every key must be public,
// valid and have a kid (a signature names its key by kid).
func LoadCardKeys(path string) (*jose.JSONWebKeySet, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseCardKeys(raw)
}

func parseCardKeys(raw []byte) (*jose.JSONWebKeySet, error) {
	return parseKeySet(raw, true)
}

// parseKeySet reads a JWKS of public keys; needKid refuses a key without a
// kid (an operator's file: such a key could never be used), else such keys
// are left out (a published key set may hold keys for other uses).
func parseKeySet(raw []byte, needKid bool) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	out := &jose.JSONWebKeySet{}
	for i, k := range set.Keys {
		switch {
		case !k.Valid():
			return nil, fmt.Errorf("key %d is not a valid key", i)
		case !k.IsPublic():
			return nil, fmt.Errorf("key %d is not a public key", i)
		case k.KeyID == "" && needKid:
			return nil, fmt.Errorf("key %d has no kid", i)
		case k.KeyID != "":
			out.Keys = append(out.Keys, k)
		}
	}
	if len(out.Keys) == 0 {
		return nil, errors.New("the key set has no keys with a kid")
	}
	return out, nil
}

// signingKeys are the keys of set that may have made a signature with kid
// and alg: a key for signing (its use, when given, is sig) of that
// algorithm (its alg, when given, is alg).
func signingKeys(set *jose.JSONWebKeySet, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range set.Key(kid) {
		if (k.Use == "" || k.Use == "sig") && (k.Algorithm == "" || k.Algorithm == alg) {
			out = append(out, k)
		}
	}
	return out
}

// CardRefusedError is a fetched card writ will not read, and why: the
// readiness check and the log say it.
type CardRefusedError struct{ Reason string }

// Error implements error.
func (e *CardRefusedError) Error() string { return "its card is refused: " + e.Reason }

func refused(format string, args ...any) error {
	return &CardRefusedError{Reason: fmt.Sprintf(format, args...)}
}

// checkCard checks a card the agent served (its card, or the extended card
// in its answer) with the edge that reads it, and returns the card to read.
func (c *Core) checkCard(ctx context.Context, rt *route, edge any, body []byte) ([]byte, error) {
	if rt.egress != nil && !rt.agent.RequireSignedCard && rt.cardKeys == nil {
		// An egress target's card is checked where the target asks for it
		// (egress.targets[].require_signed_card, card_keys): it reaches the
		// local agent from its own writ, rewritten, and the signature of a
		// target behind another writ names a key set writ may not reach.
		return body, nil
	}
	sc, ok := edge.(adapters.SignedCards)
	if !ok {
		if rt.agent.RequireSignedCard {
			return nil, refused("its protocol's cards carry no signatures, and require_signed_card is set")
		}
		return body, nil
	}
	return c.verifyCard(ctx, rt, sc, body)
}

// verifyCard checks the signatures of a card the agent served and returns
// the card to read: body itself when it is unsigned and the agent does not
// require a signature, else the content a signature verified over. A card
// whose signatures do not verify is refused whether the agent requires one
// or not: it was signed, and is not what was signed.
func (c *Core) verifyCard(ctx context.Context, rt *route, sc adapters.SignedCards, body []byte) ([]byte, error) {
	sigs, contents, err := sc.CardSignatures(body)
	if err != nil {
		return nil, refused("%v", err)
	}
	if len(sigs) == 0 {
		if rt.agent.RequireSignedCard {
			return nil, refused("it is unsigned, and require_signed_card is set")
		}
		return body, nil
	}
	var why []string
	sets := map[string]*jose.JSONWebKeySet{} // jku → its keys, fetched once per card
	for i, sig := range sigs {
		content, err := c.verifySignature(ctx, rt, sig, contents, sets)
		if err == nil {
			return content, nil
		}
		why = append(why, fmt.Sprintf("signature %d: %v", i, err))
	}
	return nil, refused("no signature verifies (%s)", strings.Join(why, "; "))
}

// verifySignature verifies one signature over one of contents and returns
// that content.
func (c *Core) verifySignature(ctx context.Context, rt *route, sig wire.Signature, contents [][]byte, sets map[string]*jose.JSONWebKeySet) ([]byte, error) {
	compact := sig.Protected + ".." + sig.Signature
	// The unprotected header is not signed: kid and jku are read from the
	// protected one only.
	jws, err := jose.ParseDetached(compact, contents[0], cardAlgs)
	if err != nil {
		return nil, fmt.Errorf("not a JWS with an accepted algorithm: %w", err)
	}
	hdr := jws.Signatures[0].Protected
	if hdr.KeyID == "" {
		return nil, errors.New("its protected header names no kid")
	}
	jku, _ := hdr.ExtraHeaders["jku"].(string)
	var set *jose.JSONWebKeySet
	switch {
	case rt.cardKeys != nil:
		set = rt.cardKeys // pinned: the card's jku is not asked
	case jku == "":
		return nil, errors.New("it names no jku, and the agent has no agents[].card_keys")
	default:
		if set = sets[jku]; set == nil {
			if set, err = c.fetchJKU(ctx, jku); err != nil {
				return nil, err
			}
			sets[jku] = set
		}
	}
	keys := signingKeys(set, hdr.KeyID, hdr.Algorithm)
	if len(keys) == 0 {
		return nil, fmt.Errorf("no signing key has kid %q and algorithm %s", hdr.KeyID, hdr.Algorithm)
	}
	for _, content := range contents {
		jws, err := jose.ParseDetached(compact, content, cardAlgs)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if _, err := jws.Verify(k.Key); err == nil {
				return content, nil
			}
		}
	}
	return nil, fmt.Errorf("kid %q: the signature does not match the card", hdr.KeyID)
}

// fetchJKU fetches the key set a signature's jku names, under the card-fetch
// SSRF rules: https only, no private, loopback or link-local address (but
// cards.jku_trusted_hosts), checked at dial time, no redirect, at most
// maxJWKSBytes, within limits.card_fetch_timeout.
func (c *Core) fetchJKU(ctx context.Context, jku string) (*jose.JSONWebKeySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jku, nil)
	if err != nil {
		return nil, fmt.Errorf("jku %q is not a URL", jku)
	}
	resp, err := c.jku.Do(req)
	if err != nil {
		var r *push.RefusedError
		if errors.As(err, &r) {
			return nil, fmt.Errorf("jku %s refused: %s", jku, r.Reason)
		}
		return nil, fmt.Errorf("jku %s: %w", jku, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jku %s answered %d", jku, resp.StatusCode)
	}
	raw, err := push.ReadLimited(resp.Body, maxJWKSBytes)
	if err != nil {
		return nil, fmt.Errorf("jku %s: %w", jku, err)
	}
	set, err := parseKeySet(raw, false)
	if err != nil {
		return nil, fmt.Errorf("jku %s: %w", jku, err)
	}
	return set, nil
}

// serveJWKS answers JWKSPath with the key set of writ's card signatures.
func (c *Core) serveJWKS() Outcome {
	return Outcome{Kind: Serve, Answer: wire.Rendered{Status: http.StatusOK, ContentType: "application/jwk-set+json",
		Body: c.cardKey.jwks, Header: http.Header{"Cache-Control": {"public, max-age=300"}}}}
}
