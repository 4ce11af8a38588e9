package sts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/internal/devidp"
)

// signingKey is the STS's ES256 key: it signs every token, and its public
// half is the JWKS.
type signingKey struct {
	priv   *ecdsa.PrivateKey
	kid    string
	signer jose.Signer
}

// loadKey reads the key at path, or generates one and writes it there (0600,
// its directory 0700) when the file does not exist; an empty path is a key
// that lives only in memory. A key file others may read is refused: whoever
// reads it signs any token this STS's relying parties accept.
func loadKey(path string) (*signingKey, error) {
	var priv *ecdsa.PrivateKey
	var err error
	if path == "" {
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("signing_key_file: %w", err)
		}
		if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("signing_key_file: %s is readable by others (mode %04o): chmod 600 it", path, info.Mode().Perm())
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("signing_key_file: %w", err)
		}
		priv, err = devidp.LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("signing_key_file: %w", err)
	}
	return newSigningKey(priv)
}

func newSigningKey(priv *ecdsa.PrivateKey) (*signingKey, error) {
	// The kid is the key's RFC 7638 thumbprint: a new key gets a new kid,
	// so a relying party that cached the old JWKS fetches the new one.
	thumb, err := (&jose.JSONWebKey{Key: &priv.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(thumb)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: priv},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return &signingKey{priv: priv, kid: kid, signer: signer}, nil
}

// public is the key's public JWK.
func (k *signingKey) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &k.priv.PublicKey, KeyID: k.kid, Algorithm: string(jose.ES256), Use: "sig"}
}

// jwks is the JWKS document.
func (k *signingKey) jwks() ([]byte, error) {
	return json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.public()}})
}

// sign signs claims (a struct that encodes to a JSON object) as a compact JWS.
func (k *signingKey) sign(claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := k.signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
