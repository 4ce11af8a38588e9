package identity

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// The values of Refusal.Code: one stable name per way a credential fails,
// for the decision log and writ's own log. They never change.
const (
	CodeTokenInvalid     = "token_invalid"
	CodeBadSignature     = "bad_signature"
	CodeAudienceRejected = "audience_rejected"
	CodeTokenExpired     = "token_expired"
	CodeTokenNotYetValid = "token_not_yet_valid"
	CodeUnknownIssuer    = "unknown_issuer"
	CodeUnknownKey       = "unknown_key"
	CodeKeysUnavailable  = "keys_unavailable"
	CodeChainTooDeep     = "chain_too_deep"
	CodeClaimType        = "claim_type"
	CodeCertificate      = "certificate_rejected"
)

// codes maps the sentinels to their codes, the refinements of
// ErrTokenInvalid before it.
var codes = []struct {
	err  error
	code string
}{
	{ErrBadSignature, CodeBadSignature}, {ErrAudienceRejected, CodeAudienceRejected},
	{ErrTokenExpired, CodeTokenExpired}, {ErrTokenNotYetValid, CodeTokenNotYetValid},
	{ErrUnknownIssuer, CodeUnknownIssuer}, {ErrUnknownKey, CodeUnknownKey},
	{ErrKeysUnavailable, CodeKeysUnavailable}, {ErrChainTooDeep, CodeChainTooDeep},
	{ErrClaimType, CodeClaimType}, {ErrCertificate, CodeCertificate},
	{ErrTokenInvalid, CodeTokenInvalid},
}

// Code is the stable name of a credential's failure (one of the Code
// constants); "" for an error that wraps none of the sentinels.
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// Refusal is the detail of a refused credential, for the decision log: the
// failure's code, what the credential presented and what writ accepts, so
// that an operator reading the line sees at once that a token was minted
// for another audience, by another issuer, or with a key writ does not
// hold. Every error Identify, VerifyToken, VerifyFor and VerifiedClaims
// return is one (errors.As); it wraps the sentinel, so errors.Is works as
// before, and its text is the wrapped error's.
//
// It never holds the token, nor any claim but iss and aud: a credential's
// secret is the token itself, and what a log reader needs to see is where
// the token was meant to go. What it presented is read without being
// believed (before, or without, a signature that verifies): it is data,
// escaped by whatever writes it, each string bounded.
type Refusal struct {
	// Code names the failure (Code).
	Code string
	// Presented is what the credential said of itself.
	Presented Presented
	// Accepted is what writ accepts of the issuer the credential named, or
	// the issuers it accepts when it named none writ knows.
	Accepted Accepted
	err      error
}

// Presented is what a refused credential said of itself: a JWT's iss, aud,
// kid and alg; a certificate's SPIFFE ID.
type Presented struct {
	Issuer    string
	Audiences []string
	KeyID     string
	Algorithm string
	SPIFFEID  string
}

// Accepted is what writ accepts: issuers (all of them when the token named
// none known), the audiences and key ids of the issuer the token named, the
// mTLS trust domain.
type Accepted struct {
	Issuers     []string
	Audiences   []string
	KeyIDs      []string
	TrustDomain string
}

func (r *Refusal) Error() string { return r.err.Error() }

// Unwrap is the failure's error, which wraps a sentinel.
func (r *Refusal) Unwrap() error { return r.err }

// The bounds of what a refusal quotes of a credential (trunc bounds each
// string): a hostile token names at most this many audiences in the log,
// and a key set at most this many key ids.
const (
	maxPresentedAudiences = 8
	maxAcceptedKeyIDs     = 16
)

// refusal is the Refusal of a bearer token that failed with err; audiences,
// when not nil, are the audiences it was checked against instead of its
// issuer's own (VerifyFor).
func (r *Resolver) refusal(tok string, err error, audiences []string) error {
	if err == nil {
		return nil
	}
	var already *Refusal
	if errors.As(err, &already) {
		return err
	}
	out := &Refusal{Code: Code(err), err: err}
	if !looksLikeJWS(tok) {
		// A static token (or none usable): nothing of it is quoted.
		return out
	}
	out.Presented = peekJWT(tok)
	iss := r.issuers[out.Presented.Issuer]
	if iss == nil {
		for name := range r.issuers {
			out.Accepted.Issuers = append(out.Accepted.Issuers, name)
		}
		slices.Sort(out.Accepted.Issuers)
		return out
	}
	out.Accepted.Issuers = []string{iss.name}
	out.Accepted.Audiences = iss.audiences
	if audiences != nil {
		out.Accepted.Audiences = audiences
	}
	out.Accepted.KeyIDs = iss.keys.keyIDs()
	return out
}

// claimsRefusal is the Refusal of a claim set something in front of writ
// verified (VerifiedClaims).
func (r *Resolver) claimsRefusal(claims map[string]any, err error) error {
	out := &Refusal{Code: Code(err), err: err}
	out.Presented.Issuer, _ = claims["iss"].(string)
	out.Presented.Issuer = trunc(out.Presented.Issuer)
	out.Presented.Audiences = audiencesOf(claims["aud"])
	if iss := r.issuers[out.Presented.Issuer]; iss != nil {
		out.Accepted.Issuers, out.Accepted.Audiences = []string{iss.name}, iss.audiences
	}
	return out
}

// certRefusal is the Refusal of a client certificate.
func (m *mtlsSource) certRefusal(cert *x509.Certificate, err error) error {
	out := &Refusal{Code: Code(err), err: err, Accepted: Accepted{TrustDomain: m.trustDomain}}
	for _, u := range cert.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			out.Presented.SPIFFEID = trunc(u.String())
			break
		}
	}
	return out
}

// peekJWT reads a compact JWS's kid, alg, iss and aud without verifying
// anything, for a refusal: what the token claims to be, not what it is.
func peekJWT(tok string) Presented {
	var p Presented
	head, rest, _ := strings.Cut(tok, ".")
	body, _, _ := strings.Cut(rest, ".")
	var h struct {
		Kid any `json:"kid"`
		Alg any `json:"alg"`
	}
	if raw, err := b64.DecodeString(head); err == nil && json.Unmarshal(raw, &h) == nil {
		p.KeyID, _ = h.Kid.(string)
		p.Algorithm, _ = h.Alg.(string)
	}
	var c struct {
		Iss any `json:"iss"`
		Aud any `json:"aud"`
	}
	if raw, err := b64.DecodeString(body); err == nil && json.Unmarshal(raw, &c) == nil {
		p.Issuer, _ = c.Iss.(string)
		p.Audiences = audiencesOf(c.Aud)
	}
	p.KeyID, p.Algorithm, p.Issuer = trunc(p.KeyID), trunc(p.Algorithm), trunc(p.Issuer)
	return p
}

// audiencesOf is an aud claim's strings (a string or a list), bounded.
func audiencesOf(v any) []string {
	switch a := v.(type) {
	case string:
		return []string{trunc(a)}
	case []any:
		var out []string
		for _, x := range a {
			if s, ok := x.(string); ok && len(out) < maxPresentedAudiences {
				out = append(out, trunc(s))
			}
		}
		return out
	}
	return nil
}
