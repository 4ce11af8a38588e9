package sts

import (
	"encoding/json"
)

// tokenResponse is RFC 8693 §2.2.1's answer (and RFC 6749 §5.1's, for the
// client_credentials grant).
type tokenResponse struct {
	AccessToken     string `json:"access_token"`
	IssuedTokenType string `json:"issued_token_type"`
	TokenType       string `json:"token_type"`
	ExpiresIn       int64  `json:"expires_in"`
	Scope           string `json:"scope,omitempty"`
}

// marshalResponse encodes the token endpoint's answer: the access token is
// what it exists to send (RFC 8693 §2.2.1), to the authenticated client only.
func marshalResponse(r *tokenResponse) ([]byte, error) { return json.Marshal(r) } //nolint:gosec // G117: the token response carries the token by definition

// errorBody is RFC 6749 §5.2's error document.
func errorBody(e *Error) []byte {
	raw, err := json.Marshal(struct {
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
	}{e.Code, e.Description})
	if err != nil {
		// Two strings always encode; keep the code regardless.
		return []byte(`{"error":"server_error"}`)
	}
	return raw
}

// discoveryDocument is the RFC 8414 authorization server metadata: the
// registered fields only.
func discoveryDocument(issuer string, basicClients bool) ([]byte, error) {
	auth := []string{}
	if basicClients {
		auth = append(auth, "client_secret_basic")
	}
	return json.MarshalIndent(struct {
		Issuer        string   `json:"issuer"`
		TokenEndpoint string   `json:"token_endpoint"`
		JWKSURI       string   `json:"jwks_uri"`
		GrantTypes    []string `json:"grant_types_supported"`
		ResponseTypes []string `json:"response_types_supported"`
		AuthMethods   []string `json:"token_endpoint_auth_methods_supported"`
	}{
		Issuer:        issuer,
		TokenEndpoint: issuer + TokenPath,
		JWKSURI:       issuer + JWKSPath,
		GrantTypes:    []string{GrantTokenExchange, GrantClientCredentials},
		ResponseTypes: []string{}, // no authorization endpoint: nothing is issued there
		AuthMethods:   auth,
	}, "", "  ")
}
