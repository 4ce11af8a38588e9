package decisionlog

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// checkpointAlgs are the algorithms a checkpoint may be signed with; Verify
// accepts no other (so neither "none" nor an HMAC keyed with a public key).
var checkpointAlgs = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256}

// maxKeyFile bounds a key or JWKS file: real ones are a few hundred bytes.
const maxKeyFile = 1 << 20

// Signer signs checkpoints: Ed25519 (EdDSA) or ECDSA P-256 (ES256), JWS
// compact serialization with the key's id (its RFC 7638 thumbprint) in the
// header. Safe for one goroutine at a time, which is how the writer uses it.
type Signer struct {
	kid string
	alg jose.SignatureAlgorithm
	s   jose.Signer
}

// KeyID is the kid the signer puts in every checkpoint's header.
func (s *Signer) KeyID() string { return s.kid }

// Algorithm is the JWS algorithm, EdDSA or ES256.
func (s *Signer) Algorithm() string { return string(s.alg) }

func (s *Signer) sign(payload []byte) (string, error) {
	jws, err := s.s.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// LoadSigner reads decision_log.signing_key_file: a PEM private key, Ed25519
// or ECDSA P-256, in PKCS #8 ("PRIVATE KEY") or, for ECDSA, SEC 1 ("EC
// PRIVATE KEY", an "EC PARAMETERS" block before it ignored) form. Other keys (RSA, other curves, encrypted PEM) are
// refused with the reason.
func LoadSigner(path string) (*Signer, error) {
	raw, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	// openssl ecparam -genkey writes the curve's parameters before the key:
	// they are skipped (the key names its curve itself).
	var block *pem.Block
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "EC PARAMETERS" {
			continue
		}
		if block != nil {
			return nil, fmt.Errorf("%s: holds more than one PEM block; give the signing key alone", path)
		}
		block = b
	}
	if block == nil {
		return nil, fmt.Errorf("%s: not a PEM file", path)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("%s: the key is encrypted; writ reads an unencrypted key (keep the file 0600)", path)
	default:
		return nil, fmt.Errorf("%s: a PEM %q block, not a private key", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, err := newSigner(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func newSigner(key any) (*Signer, error) {
	var alg jose.SignatureAlgorithm
	switch k := key.(type) {
	case ed25519.PrivateKey:
		alg = jose.EdDSA
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("an ECDSA key on %s: checkpoints are signed with P-256 (ES256) or Ed25519", k.Curve.Params().Name)
		}
		alg = jose.ES256
	case *rsa.PrivateKey:
		return nil, errors.New("an RSA key: checkpoints are signed with Ed25519 or ECDSA P-256")
	default:
		return nil, fmt.Errorf("a %T: checkpoints are signed with Ed25519 or ECDSA P-256", key)
	}
	pub := jose.JSONWebKey{Key: key.(crypto.Signer).Public()}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	js, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		return nil, err
	}
	return &Signer{kid: kid, alg: alg, s: js}, nil
}

// Keys are the public keys Verify checks checkpoint signatures with.
type Keys struct {
	keys []jose.JSONWebKey
}

// LoadKeys reads the public half of checkpoint keys: a JWKS document (a
// JSON object with "keys") or PEM "PUBLIC KEY" blocks (one or more). Each
// key must be a public Ed25519 or ECDSA P-256 key. A PEM key's kid is its
// RFC 7638 thumbprint, which is the kid writ signs with; a JWKS key may name
// another kid, and is also found by its thumbprint.
func LoadKeys(path string) (*Keys, error) {
	raw, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	var keys []jose.JSONWebKey
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(t, &set); err != nil {
			return nil, fmt.Errorf("%s: not a JWKS document: %w", path, err)
		}
		keys = set.Keys
	} else {
		for rest := raw; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "PUBLIC KEY" {
				return nil, fmt.Errorf("%s: a PEM %q block; give the public key (PUBLIC KEY) or a JWKS", path, block.Type)
			}
			k, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			keys = append(keys, jose.JSONWebKey{Key: k})
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: holds no key (want PEM PUBLIC KEY blocks or a JWKS)", path)
	}
	for i := range keys {
		if err := checkPublic(&keys[i]); err != nil {
			return nil, fmt.Errorf("%s: key %d: %w", path, i+1, err)
		}
	}
	return &Keys{keys: keys}, nil
}

func checkPublic(k *jose.JSONWebKey) error {
	switch pk := k.Key.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pk.Curve != elliptic.P256() {
			return fmt.Errorf("an ECDSA key on %s, not P-256", pk.Curve.Params().Name)
		}
	default:
		return fmt.Errorf("a %T: want a public Ed25519 or ECDSA P-256 key", k.Key)
	}
	if k.KeyID == "" {
		tp, err := k.Thumbprint(crypto.SHA256)
		if err != nil {
			return err
		}
		k.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	}
	return nil
}

// errUnknownKey: no key of the set has the checkpoint's kid.
var errUnknownKey = errors.New("no key given has its kid")

// verify checks a checkpoint's JWS and returns its payload.
func (ks *Keys) verify(compact string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(compact, checkpointAlgs)
	if err != nil {
		return nil, err
	}
	hdr := jws.Signatures[0].Header
	matched := false
	for _, k := range ks.keys {
		if !ks.matches(&k, hdr.KeyID) || k.Algorithm != "" && k.Algorithm != hdr.Algorithm {
			continue
		}
		matched = true
		if p, err := jws.Verify(k.Key); err == nil {
			return p, nil
		}
	}
	if matched {
		return nil, fmt.Errorf("the signature does not verify with key %q", hdr.KeyID)
	}
	return nil, fmt.Errorf("kid %q: %w", hdr.KeyID, errUnknownKey)
}

func (ks *Keys) matches(k *jose.JSONWebKey, kid string) bool {
	if k.KeyID == kid {
		return true
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	return err == nil && base64.RawURLEncoding.EncodeToString(tp) == kid
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(raw) > maxKeyFile {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a key file", path, maxKeyFile)
	}
	return raw, nil
}
