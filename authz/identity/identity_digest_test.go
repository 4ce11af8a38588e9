package identity

import (
	"crypto/sha256"
	"encoding/json"
	"testing"
)

func TestClaimsDigest(t *testing.T) {
	claims := map[string]any{"sub": "u-42", "act": map[string]any{"sub": "a"}, "scope": "delegate"}
	raw, _ := json.Marshal(claims)
	if DigestClaims(claims) != sha256.Sum256(raw) {
		t.Fatal("digest is not the SHA-256 of the canonical JSON")
	}
	other := map[string]any{"sub": "u-42", "act": map[string]any{"sub": "b"}, "scope": "delegate"}
	if DigestClaims(claims) == DigestClaims(other) {
		t.Fatal("different claims, same digest")
	}
}
