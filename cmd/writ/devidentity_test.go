package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestDevIdentityIsNeverSilent: a configuration that accepts writ's
// development identity — its key under a production issuer's name, or an
// issuer named writ-dev — is a warning of writ validate and fails it with
// -strict; a configuration with a key of its own passes -strict. writ dev
// token signs for the development issuer only. writ serve logs a warning at
// start and again on a reload.
//
// Threat: the development identity deployed: a config that points an issuer
// at the JWKS `writ dev jwks` wrote (or names writ-dev) accepts tokens that
// anyone with the key directory mints for any caller — and `writ dev token
// -iss <the real issuer>` mints them under the production issuer's name.
// Defence: writ's development key carries its own kid (writ-dev-1) wherever
// its JWKS is copied; validate warns (-strict fails), serve warns at start
// and on every reload, and dev token refuses any other issuer.
func TestDevIdentityIsNeverSilent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	devDir := filepath.Join(dir, "dev")
	devJWKS := filepath.Join(dir, "dev-jwks.json")
	if code, _, errOut := runCLI(t, "", "dev", "jwks", "-dir", devDir, "-o", devJWKS); code != 0 {
		t.Fatalf("dev jwks: %s", errOut)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	own, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "bank-2026", Algorithm: "ES256", Use: "sig"}}})
	ownJWKS := write("own-jwks.json", string(own))
	agent := "agents:\n  - name: my-agent\n    upstream: http://127.0.0.1:9000\n    max_data_classification: confidential\n    security_schemes: [oauth2]\n"
	for _, c := range []struct {
		name, issuer, jwks string
		warn               string // "" for none
	}{
		{"the dev key under a production issuer's name", "https://idp.bank.ae", devJWKS, "identity.jwt[0].jwks_file: its JWKS file holds writ's development key"},
		{"the dev issuer with a key of its own", "writ-dev", ownJWKS, `identity.jwt[0].issuer: "writ-dev" is the issuer of writ's development identity`},
		{"a production issuer and key", "https://idp.bank.ae", ownJWKS, ""},
	} {
		cfg := write(strings.ReplaceAll(c.name, " ", "-")+".yaml", agent+"identity:\n  jwt: [{issuer: '"+c.issuer+"', audiences: [my-agent], jwks_file: '"+c.jwks+"'}]\n")
		code, out, errOut := runCLI(t, "", "validate", "-offline", "-strict", "-config", cfg)
		switch {
		case c.warn == "" && code != 0:
			t.Errorf("%s: -strict exit %d: %s%s", c.name, code, out, errOut)
		case c.warn != "" && (code != 1 || !strings.Contains(errOut, "warning: "+c.warn)):
			t.Errorf("%s: -strict exit %d, want 1 with %q:\n%s%s", c.name, code, c.warn, out, errOut)
		}
	}
	// dev token signs for the development issuer (and writ-dev-<suffix>) only.
	for iss, want := range map[string]int{"https://idp.bank.ae": 2, "writ-devious": 2, "writ-dev": 0, "writ-dev-team-a": 0} {
		if code, _, errOut := runCLI(t, "", "dev", "token", "-dir", devDir, "-iss", iss); code != want {
			t.Errorf("dev token -iss %s: exit %d, want %d (%s)", iss, code, want, errOut)
		}
	}

	// writ serve in front of an agent, accepting a development key (the
	// fault world's identity is devidp's): a warning at start, and again on
	// a reload.
	w := startFaultWrit(t, fwOptions{})
	const msg = "writ's development key"
	if n := len(w.LogLines(msg)); n == 0 {
		t.Fatalf("no warning at start:\n%s", w.Log())
	}
	for _, l := range w.LogLines(msg) {
		if !strings.Contains(l, `"level":"WARN"`) {
			t.Errorf("not a warning: %s", l)
		}
	}
	before := len(w.LogLines(msg))
	if err := w.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a warning on reload", 20*time.Second, func() bool { return len(w.LogLines(msg)) > before })
}
