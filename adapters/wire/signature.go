package wire

import "github.com/writ-authz/writ/task"

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

// CardRewrite is what writ does to an agent's card it passes on in the
// agent's own answer (the extended card): Verify checks the card as the
// agent sent it and returns the content to read (the content a signature
// covers), Publish rewrites the card read, and Sign signs it as rendered.
// A nil Verify or Sign is skipped.
type CardRewrite struct {
	Verify  func(card []byte) ([]byte, error)
	Publish func(*task.AgentCard) *task.AgentCard
	Sign    Signer
}
