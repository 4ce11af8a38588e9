package sts

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The grant types and token types of RFC 8693 and RFC 6749 the STS speaks.
const (
	GrantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
	GrantClientCredentials = "client_credentials"
	TokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
)

// Bounds of a token request.
const (
	// maxBodyBytes bounds the form: two tokens of at most 16 KiB each (what
	// identity accepts) and a few short parameters.
	maxBodyBytes = 64 << 10
	// maxParamBytes bounds every parameter other than the tokens.
	maxParamBytes = 1024
	// maxScopes bounds the scope values of one request.
	maxScopes = 64
)

// tokenRequest is a token request as the form said it, checked for shape
// only: nothing in it is verified yet.
type tokenRequest struct {
	GrantType          string
	SubjectToken       string
	SubjectTokenType   string
	ActorToken         string
	ActorTokenType     string
	RequestedTokenType string
	// Target is the one audience or resource named ("" when none).
	Target string
	// Scope is the requested scope values, in order, each once; ScopeGiven
	// says the parameter was present.
	Scope      []string
	ScopeGiven bool
	// Classification and Tenant are writ sts's extension parameters: the
	// ceiling and tenant the client asks for ("" when not asked).
	Classification string
	Tenant         string
	TenantGiven    bool
	// Lifetime is requested_lifetime, writ sts's extension (0 when not asked).
	Lifetime time.Duration
	// Basic is the HTTP Basic client credentials, when sent.
	Basic               bool
	ClientID, ClientKey string
}

// parseTokenRequest reads a token request from its Content-Type, URL query,
// Authorization header and body, as RFC 6749 §3.2 and §2.3.1 and RFC 8693
// §2.1 define them, strictly: a parameter named twice, one in the URL, a
// body that is not a form or too large, a malformed Basic header: each
// refused with invalid_request (invalid_client for the header).
func parseTokenRequest(contentType, rawQuery, authorization string, body []byte) (tokenRequest, *Error) {
	var req tokenRequest
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return req, refuse(CodeInvalidRequest, "the body must be application/x-www-form-urlencoded")
	}
	if rawQuery != "" {
		return req, refuse(CodeInvalidRequest, "parameters belong in the body, not the URL")
	}
	if len(body) > maxBodyBytes {
		return req, refuse(CodeInvalidRequest, "the body is larger than %d bytes", maxBodyBytes)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return req, refuse(CodeInvalidRequest, "the body is not a valid form")
	}
	for name, vals := range form {
		// RFC 6749 §3.2: parameters MUST NOT be included more than once.
		if len(vals) > 1 {
			return req, refuse(CodeInvalidRequest, "parameter %s is given %d times", clip(name), len(vals))
		}
		if !utf8.ValidString(vals[0]) || strings.ContainsFunc(vals[0], isControl) {
			return req, refuse(CodeInvalidRequest, "parameter %s is not printable text", clip(name))
		}
	}
	get := func(name string) string { return form.Get(name) }
	for _, name := range []string{"grant_type", "subject_token_type", "actor_token_type", "requested_token_type",
		"audience", "resource", "scope", "classification", "tenant", "requested_lifetime"} {
		if len(get(name)) > maxParamBytes {
			return req, refuse(CodeInvalidRequest, "parameter %s is longer than %d bytes", name, maxParamBytes)
		}
	}
	if form.Has("client_secret") {
		return req, refuse(CodeInvalidClient, "client_secret in the body is not accepted: authenticate with HTTP Basic")
	}
	req.GrantType = get("grant_type")
	req.SubjectToken, req.SubjectTokenType = get("subject_token"), get("subject_token_type")
	req.ActorToken, req.ActorTokenType = get("actor_token"), get("actor_token_type")
	req.RequestedTokenType = get("requested_token_type")
	if req.Target, err = target(get("audience"), get("resource")); err != nil {
		return req, refuse(CodeInvalidTarget, "%v", err)
	}
	if req.ScopeGiven = get("scope") != ""; req.ScopeGiven {
		if req.Scope, err = parseScope(get("scope")); err != nil {
			return req, refuse(CodeInvalidScope, "%v", err)
		}
	}
	req.Classification = get("classification")
	req.Tenant, req.TenantGiven = get("tenant"), get("tenant") != ""
	if s := get("requested_lifetime"); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n == 0 {
			return req, refuse(CodeInvalidRequest, "requested_lifetime must be a positive number of seconds")
		}
		req.Lifetime = time.Duration(n) * time.Second
	}
	if authorization != "" {
		if req.ClientID, req.ClientKey, err = basicCredentials(authorization); err != nil {
			e := refuse(CodeInvalidClient, "%v", err)
			e.basic = true
			return req, e
		}
		req.Basic = true
	}
	return req, nil
}

// target is the one target an exchange names: RFC 8693 allows several
// audience and resource values; writ sts issues a token for one, so that a
// token is never good at two agents.
func target(audience, resource string) (string, error) {
	switch {
	case audience != "" && resource != "" && audience != resource:
		return "", fmt.Errorf("audience and resource name different targets: one target per exchange")
	case audience != "":
		return audience, nil
	}
	return resource, nil
}

// parseScope splits a scope parameter (RFC 6749 §3.3: space-delimited
// scope-tokens of %x21 / %x23-5B / %x5D-7E), dropping repeats.
func parseScope(s string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(s, " ") {
		if v == "" {
			return nil, fmt.Errorf("scope has an empty value (values are separated by one space)")
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x21 || c == 0x22 || c == 0x5c || c > 0x7e {
				return nil, fmt.Errorf("scope value %q has a character RFC 6749 does not allow", clip(v))
			}
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) > maxScopes {
		return nil, fmt.Errorf("more than %d scope values", maxScopes)
	}
	return out, nil
}

// basicCredentials reads an `Authorization: Basic` header. RFC 6749 §2.3.1:
// the client id and secret are form-encoded before they are joined.
func basicCredentials(h string) (id, secret string, err error) {
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Basic") {
		return "", "", fmt.Errorf("client authentication must be HTTP Basic")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return "", "", fmt.Errorf("the Basic credentials are not base64")
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", fmt.Errorf("the Basic credentials have no colon")
	}
	if id, err = url.QueryUnescape(user); err == nil {
		secret, err = url.QueryUnescape(pass)
	}
	if err != nil || id == "" || !utf8.ValidString(id) || !utf8.ValidString(secret) {
		return "", "", fmt.Errorf("the Basic credentials are not a form-encoded client id and secret")
	}
	return id, secret, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// clip shortens a client-supplied string before it goes into a description.
func clip(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}
