package sts

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// clients are the HTTP Basic clients of client_secrets_file, by client id,
// each with the SHA-256 of its secret: the secrets themselves are not kept,
// and every comparison costs the same.
type clients map[string][sha256.Size]byte

// loadClients reads a YAML map client_id → secret.
func loadClients(path string) (clients, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client_secrets_file: %w", err)
	}
	var m map[string]string
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("client_secrets_file: %s: not a map of client id to secret: %w", path, err)
	}
	out := make(clients, len(m))
	for id, secret := range m {
		switch {
		case id == "" || strings.ContainsAny(id, ": \t"):
			return nil, fmt.Errorf("client_secrets_file: %s: client id %q must be non-empty, without colon or space", path, id)
		case len(secret) < 8:
			return nil, fmt.Errorf("client_secrets_file: %s: the secret of %q is shorter than 8 characters", path, id)
		}
		out[id] = sha256.Sum256([]byte(secret))
	}
	return out, nil
}

// unknownClient is compared against when the id is unknown, so an unknown id
// costs what a wrong secret does.
var unknownClient = sha256.Sum256([]byte("writ-sts unknown client"))

// check reports whether secret is id's.
func (c clients) check(id, secret string) bool {
	want, ok := c[id]
	if !ok {
		want = unknownClient
	}
	got := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok
}
