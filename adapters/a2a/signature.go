package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/writ-authz/writ/adapters/wire"
)

// Signed agent cards (A2A 1.0 §8.4). A card may carry "signatures": each a
// JWS (RFC 7515) whose payload is detached — the RFC 8785 (JCS) canonical
// JSON of the card without its signatures, after "properties with default
// values" are removed. The spec defines those by the proto's field presence;
// the SDKs (@a2a-js/sdk's canonicalizeAgentCard, the Python SDK's signing
// utilities) remove every empty string, list and object and every null, and
// the false of a plain (not optional) bool. A signer that serves exactly what
// it signed needs no removal at all. So a fetched card is checked against
// both contents (literal and without defaults), and a card writ signs is
// served already without defaults, so that every verifier computes the same
// content from it.

// signaturesMember is the card member that holds the signatures.
const signaturesMember = "signatures"

// MaxCardSignatures bounds the signatures a card may carry: each may name a
// key set to fetch.
const MaxCardSignatures = 8

// ErrCardSignatures is the error of a card whose signatures cannot be read
// (not a list of JWS objects, too many, a card that has no canonical form).
var ErrCardSignatures = errors.New("the card's signatures cannot be read")

// CardSignatures reads a card an agent served: its signatures (none: the
// card is unsigned) and the contents a signature may cover, each the JCS
// canonical JSON of the card without its signatures — first the card as
// served, then the card without the members at their default value (the
// SDKs' canonical form), when that differs. A content a signature verifies
// over is itself a card: read it in place of body, so that nothing a
// signature does not cover is read (what differs between body and the
// content is only what the content leaves out).
func CardSignatures(body []byte) ([]wire.Signature, [][]byte, error) {
	doc, err := decodeObject(body)
	if err != nil {
		return nil, nil, err
	}
	raw, present := doc[signaturesMember]
	if !present {
		return nil, nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q is not a list", ErrCardSignatures, signaturesMember)
	}
	if len(list) == 0 {
		return nil, nil, nil
	}
	if len(list) > MaxCardSignatures {
		return nil, nil, fmt.Errorf("%w: %d signatures, at most %d are read", ErrCardSignatures, len(list), MaxCardSignatures)
	}
	// The canonical form refuses what has none (duplicate members, numbers
	// out of range, invalid UTF-8): a signed card must mean one thing.
	if _, err := jcs.Transform(body); err != nil {
		return nil, nil, fmt.Errorf("%w: the card has no canonical form: %w", ErrCardSignatures, err)
	}
	sigs := make([]wire.Signature, 0, len(list))
	for i, s := range list {
		m, ok := s.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("%w: signature %d is not an object", ErrCardSignatures, i)
		}
		var sig wire.Signature
		sig.Protected, _ = m["protected"].(string)
		sig.Signature, _ = m["signature"].(string)
		if h, present := m["header"]; present {
			if sig.Header, ok = h.(map[string]any); !ok {
				return nil, nil, fmt.Errorf("%w: signature %d: its header is not an object", ErrCardSignatures, i)
			}
		}
		if sig.Protected == "" || sig.Signature == "" {
			return nil, nil, fmt.Errorf("%w: signature %d lacks its protected header or its signature", ErrCardSignatures, i)
		}
		sigs = append(sigs, sig)
	}
	delete(doc, signaturesMember)
	literal, err := canonical(doc)
	if err != nil {
		return nil, nil, err
	}
	contents := [][]byte{literal}
	if cleaned, err := canonical(withoutDefaults(doc)); err != nil {
		return nil, nil, err
	} else if !bytes.Equal(cleaned, literal) {
		contents = append(contents, cleaned)
	}
	return sigs, contents, nil
}

// SignCard signs a card rendered by RenderCard in version's shape (V10 or
// V03) and
// returns the bytes to serve: the card with sign's signature as its only
// one (the agent's own, over a card writ rewrote, would not verify). A 1.0
// card is served without the members at their default value, so that its
// JCS content is the same for a verifier that removes them (the SDKs) and
// one that does not; a 0.3 card keeps the empty lists its schema requires.
func SignCard(body []byte, version string, sign wire.Signer) ([]byte, error) {
	doc, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	delete(doc, signaturesMember)
	if version == V10 {
		doc = withoutDefaults(doc)
	}
	content, err := canonical(doc)
	if err != nil {
		return nil, err
	}
	sig, err := sign(content)
	if err != nil {
		return nil, fmt.Errorf("signing the card: %w", err)
	}
	doc[signaturesMember] = []wire.Signature{sig}
	return marshal(doc)
}

// decodeObject decodes a JSON object, numbers kept as written.
func decodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("agent card is not a JSON object: %w", err)
	}
	if doc == nil {
		return nil, errors.New("agent card is not a JSON object")
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("agent card has data after its object")
	}
	return doc, nil
}

// marshal encodes v without HTML escapes (a card is JSON, not a page).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// canonical is the RFC 8785 form of v.
func canonical(v any) ([]byte, error) {
	b, err := marshal(v)
	if err != nil {
		return nil, err
	}
	out, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCardSignatures, err)
	}
	return out, nil
}

// withoutDefaults is a card without its members at their default value, as
// the SDKs canonicalise a card: every null, empty string, empty list and
// empty object removed (depth first, so a list or object emptied by the
// removal goes too), and the false of the card's plain bools
// (capabilities.extensions[].required, an authorization-code flow's
// pkceRequired). The optional bools (streaming, pushNotifications,
// extendedAgentCard) keep an explicit false: it is a choice, and stays
// signed.
func withoutDefaults(card map[string]any) map[string]any {
	if m, ok := clean(card, "").(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// plainBools are the members (by their key, under the parent named with
// them) whose false is a default, not a choice.
var plainBools = map[string]bool{"extensions/required": true, "authorizationCode/pkceRequired": true}

// clean removes the defaults from v, a member named key (of an element of
// the list named key); nil means removed.
func clean(v any, key string) any {
	switch t := v.(type) {
	case nil:
		return nil
	case string:
		if t == "" {
			return nil
		}
	case []any:
		var out []any
		for _, e := range t {
			if c := clean(e, key); c != nil {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if b, ok := e.(bool); ok && !b && plainBools[key+"/"+k] {
				continue
			}
			if c := clean(e, k); c != nil {
				out[k] = c
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}
