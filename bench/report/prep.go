package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// benchKID names the key the new-token workload's tokens are signed with. The
// key is generated once and kept in the cache directory (never committed); the
// JWKS writ loads holds it beside the key of bench/request_allow.json's token.
const benchKID = "writ-bench-1"

// loadOrCreateKey returns the bench signing key, generating it on first use.
func loadOrCreateKey(cache string) (*rsa.PrivateKey, error) {
	path := filepath.Join(cache, "bench_key.pem")
	if raw, err := os.ReadFile(path); err == nil {
		b, _ := pem.Decode(raw)
		if b == nil {
			return nil, fmt.Errorf("%s: not PEM", path)
		}
		return x509.ParsePKCS1PrivateKey(b.Bytes)
	}
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	raw := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return k, os.WriteFile(path, raw, 0o600)
}

// writeJWKS writes the key set writ verifies with: the committed bench key set
// (testdata/identity/bench_jwks.json) plus the generated key's public half.
func writeJWKS(path string, k *rsa.PrivateKey) error {
	raw, err := os.ReadFile("testdata/identity/bench_jwks.json")
	if err != nil {
		return err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return err
	}
	set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: benchKID, Algorithm: string(jose.RS256), Use: "sig"})
	out, err := json.Marshal(set)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644) //nolint:gosec // public keys only
}

// benchClaims are the claims of bench/request_allow.json's token, with a new
// jti and iat per token: the same caller, a different credential.
func benchClaims(i int) map[string]any {
	return map[string]any{
		"iss": "https://idp.bank.ae", "aud": "a2a-gateway", "sub": "u-42", "tenant": "wholesale",
		"scope": "delegate", "data_classification": "restricted", "exp": 4070908800,
		"iat": 1796017495 + i, "jti": fmt.Sprintf("bench-%07d", i),
		"act": map[string]any{"sub": "payments-investigator", "act": map[string]any{"sub": "orchestrator"}},
	}
}

// subjectClaims are benchClaims of another person each time (sub u-<i>): the
// distinct-subject workload, every check from a different user, the normal
// case for an agent platform.
func subjectClaims(i int) map[string]any {
	c := benchClaims(i)
	c["sub"] = fmt.Sprintf("u-%07d", i)
	return c
}

// loadOrMintTokens returns n RS256 tokens of claims(0..n-1) signed with k,
// minted in parallel on first use (about a millisecond each) and kept in the
// cache directory as name-n.txt.
func loadOrMintTokens(cache, name string, claims func(int) map[string]any, k *rsa.PrivateKey, n int) ([]string, error) {
	path := tokenFile(cache, name, n)
	if raw, err := os.ReadFile(path); err == nil {
		toks := strings.Fields(string(raw))
		if len(toks) == n {
			return toks, nil
		}
	}
	logf("minting %d RS256 tokens (once; kept in %s)", n, cache)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", benchKID))
	if err != nil {
		return nil, err
	}
	toks := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	workers := 4
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				payload, _ := json.Marshal(claims(i))
				jws, err := signer.Sign(payload)
				if err == nil {
					toks[i], err = jws.CompactSerialize()
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return toks, os.WriteFile(path, []byte(strings.Join(toks, "\n")+"\n"), 0o600)
}

// tokenFile is where loadOrMintTokens keeps n tokens of one kind: one per
// line, which bench/sidecarload's -tokens reads too.
func tokenFile(cache, name string, n int) string {
	return filepath.Join(cache, fmt.Sprintf("%s-%d.txt", name, n))
}

// template reads bench/request_allow.json as a CheckRequest.
func template() (*authv3.CheckRequest, error) {
	raw, err := os.ReadFile("bench/request_allow.json")
	if err != nil {
		return nil, err
	}
	var cr authv3.CheckRequest
	if err := protojson.Unmarshal(raw, &cr); err != nil {
		return nil, fmt.Errorf("bench/request_allow.json: %w", err)
	}
	return &cr, nil
}

// writeRequests writes n variants of the template, each made by vary, as
// length-prefixed marshaled messages (what bench/load reads).
func writeRequests(path string, tpl *authv3.CheckRequest, n int, vary func(*authv3.CheckRequest, int)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var lenbuf [binary.MaxVarintLen64]byte
	for i := range n {
		cr := proto.Clone(tpl).(*authv3.CheckRequest)
		if vary != nil {
			vary(cr, i)
		}
		b, err := proto.Marshal(cr)
		if err != nil {
			f.Close()
			return err
		}
		// A bufio.Writer's first error sticks: w.Flush below returns it.
		_, _ = w.Write(lenbuf[:binary.PutUvarint(lenbuf[:], uint64(len(b)))])
		_, _ = w.Write(b)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newContext gives request i its own contextId and messageId (same lengths as
// the template's, so the body size does not change).
func newContext(cr *authv3.CheckRequest, i int) {
	h := cr.Attributes.Request.Http
	body := h.Body
	body = strings.Replace(body, `"contextId":"ctx-wholesale-981"`, fmt.Sprintf(`"contextId":"ctx-%013d"`, i), 1)
	body = strings.Replace(body, `"messageId":"msg-0001"`, fmt.Sprintf(`"messageId":"m-%06d"`, i%1000000), 1)
	h.Body = body
}

// newToken gives request i its own bearer token.
func newToken(toks []string) func(*authv3.CheckRequest, int) {
	return func(cr *authv3.CheckRequest, i int) {
		cr.Attributes.Request.Http.Headers["authorization"] = "Bearer " + toks[i%len(toks)]
	}
}

// checkTemplate makes sure the substitutions above find what they replace.
func checkTemplate(tpl *authv3.CheckRequest) error {
	body := []byte(tpl.GetAttributes().GetRequest().GetHttp().GetBody())
	for _, s := range []string{`"contextId":"ctx-wholesale-981"`, `"messageId":"msg-0001"`} {
		if !bytes.Contains(body, []byte(s)) {
			return fmt.Errorf("bench/request_allow.json: body has no %s", s)
		}
	}
	return nil
}
