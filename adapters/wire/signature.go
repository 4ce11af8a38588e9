package wire

// Signature is one JWS (RFC 7515) signature over a document's canonical
// content, in the members of the JWS JSON serialization that a signed
// document carries: the protected header and the signature, base64url, and
// the unprotected header. The payload is detached: it is the document
// itself, canonicalised, so it is never carried twice.
type Signature struct {
	Protected string         `json:"protected"`
	Signature string         `json:"signature"`
	Header    map[string]any `json:"header,omitempty"`
}

// Signer signs the canonical content of a document writ serves (its bytes
// exactly as a verifier will canonicalise them) and returns the signature
// to attach. It is safe for concurrent use.
type Signer func(content []byte) (Signature, error)
