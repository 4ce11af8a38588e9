package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestCardSigningKeyFile: cards.signing_key_file is generated (0600, its
// directory 0700) on first use and read back on the next, with the same
// kid; a key file others may read, or one that holds no ES256 key, is
// refused (at serve, and by writ validate without creating anything).
func TestCardSigningKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "card.jwk")
	if err := CheckCardSigningKey(path); err != nil {
		t.Fatalf("a key file still to be generated: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("writ validate's check created the key")
	}
	first, err := loadCardKey(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", info, err)
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v", dir.Mode().Perm())
	}
	again, err := loadCardKey(path)
	if err != nil || again.kid != first.kid {
		t.Fatalf("the key was not kept: %v %v %v", first.kid, again, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(again.jwks, &set); err != nil || len(set.Keys) != 1 || set.Keys[0].KeyID != first.kid || !set.Keys[0].IsPublic() {
		t.Fatalf("the served JWKS %s: %v", again.jwks, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCardKey(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a key others may read: %v", err)
	}
	if err := CheckCardSigningKey(path); err == nil {
		t.Error("writ validate passes a key others may read")
	}
	other := filepath.Join(t.TempDir(), "not-ec.jwk")
	if err := os.WriteFile(other, []byte(`{"kty":"oct","k":"c2VjcmV0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCardKey(other); err == nil || !strings.Contains(err.Error(), "ES256") {
		t.Errorf("a symmetric key: %v", err)
	}
	ephemeral, err := loadCardKey("")
	if err != nil || ephemeral.kid == first.kid {
		t.Errorf("an in-memory key: %v %v", ephemeral, err)
	}
}

// TestCardKeysFile: agents[].card_keys must hold public keys, each with a kid.
func TestCardKeysFile(t *testing.T) {
	k, err := loadCardKey("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCardKeys(k.jwks); err != nil {
		t.Fatalf("a public key set: %v", err)
	}
	priv, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.priv, KeyID: "x"}}})
	noKid, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.priv.PublicKey}}})
	for name, raw := range map[string][]byte{"a private key": priv, "no kid": noKid, "empty": []byte(`{"keys":[]}`), "not JSON": []byte("x")} {
		if _, err := parseCardKeys(raw); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A published key set (a jku's) may hold keys without a kid: left out.
	mixed, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.priv.PublicKey},
		{Key: &k.priv.PublicKey, KeyID: "s", Use: "sig", Algorithm: "ES256"},
		{Key: &k.priv.PublicKey, KeyID: "e", Use: "enc"},
		{Key: &k.priv.PublicKey, KeyID: "r", Algorithm: "RS256"}}})
	set, err := parseKeySet(mixed, false)
	if err != nil || len(set.Keys) != 3 {
		t.Fatalf("a published key set: %v %v", set, err)
	}
	// Only a signing key of the signature's algorithm verifies it.
	for kid, want := range map[string]int{"s": 1, "e": 0, "r": 0} {
		if got := signingKeys(set, kid, "ES256"); len(got) != want {
			t.Errorf("kid %s: %d keys, want %d", kid, len(got), want)
		}
	}
}
