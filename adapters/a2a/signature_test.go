package a2a

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/writ-authz/writ/adapters/wire"
)

// TestCardSignaturesContents: a fetched card's signatures are read, and the
// contents they may cover are the card without them as served, then without
// its members at their default value (the SDKs' form) when that differs.
func TestCardSignaturesContents(t *testing.T) {
	card := `{"name":"a","description":"","capabilities":{"streaming":false,"extensions":[{"uri":"u","required":false}]},` +
		`"skills":[],"signatures":[{"protected":"p","signature":"s","header":{"kid":"k"}}]}`
	sigs, contents, err := CardSignatures([]byte(card))
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || sigs[0].Protected != "p" || sigs[0].Signature != "s" || sigs[0].Header["kid"] != "k" {
		t.Fatalf("signatures %+v", sigs)
	}
	want := []string{
		`{"capabilities":{"extensions":[{"required":false,"uri":"u"}],"streaming":false},"description":"","name":"a","skills":[]}`,
		// streaming is an optional bool: its explicit false is kept; required is plain.
		`{"capabilities":{"extensions":[{"uri":"u"}],"streaming":false},"name":"a"}`,
	}
	if len(contents) != 2 || string(contents[0]) != want[0] || string(contents[1]) != want[1] {
		t.Fatalf("contents:\n%s\nwant:\n%s", contents, strings.Join(want, "\n"))
	}
	// A card already without defaults has one content.
	_, contents, err = CardSignatures([]byte(`{"name":"a","signatures":[{"protected":"p","signature":"s"}]}`))
	if err != nil || len(contents) != 1 || string(contents[0]) != `{"name":"a"}` {
		t.Fatalf("%s %v", contents, err)
	}
}

// TestCardSignaturesRefused: signatures that cannot be read, and a signed
// card that has no one canonical form, are errors; no signatures (absent or
// empty) is an unsigned card.
func TestCardSignaturesRefused(t *testing.T) {
	for _, card := range []string{`{"name":"a"}`, `{"name":"a","signatures":[]}`} {
		if sigs, _, err := CardSignatures([]byte(card)); err != nil || sigs != nil {
			t.Errorf("%s: %v %v, want unsigned", card, sigs, err)
		}
	}
	many := strings.Repeat(`{"protected":"p","signature":"s"},`, MaxCardSignatures)
	for name, card := range map[string]string{
		"not a list":        `{"name":"a","signatures":{"protected":"p"}}`,
		"not an object":     `{"name":"a","signatures":["p.s"]}`,
		"no signature":      `{"name":"a","signatures":[{"protected":"p"}]}`,
		"a header not JSON": `{"name":"a","signatures":[{"protected":"p","signature":"s","header":"k"}]}`,
		"too many":          `{"name":"a","signatures":[` + many + `{"protected":"p","signature":"s"}]}`,
		"a duplicate":       `{"name":"a","name":"b","signatures":[{"protected":"p","signature":"s"}]}`,
		"trailing data":     `{"name":"a","signatures":[{"protected":"p","signature":"s"}]} {}`,
		"not an object doc": `["signatures"]`,
	} {
		if _, _, err := CardSignatures([]byte(card)); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// TestSignCardContent: the content SignCard signs is the JCS form of
// exactly the bytes it returns without their signatures; a 1.0 card is
// served without its defaults, a 0.3 card keeps the empty lists its schema
// requires, and any signature the card had is replaced.
func TestSignCardContent(t *testing.T) {
	for _, c := range []struct {
		version, card, content string
	}{
		{V10, `{"name":"a <b>","skills":[],"capabilities":{},"signatures":[{"protected":"x","signature":"y"}],"n":1.50}`,
			`{"n":1.5,"name":"a <b>"}`},
		{V03, `{"name":"a","skills":[],"capabilities":{},"url":"u"}`, `{"capabilities":{},"name":"a","skills":[],"url":"u"}`},
	} {
		var signed []byte
		out, err := SignCard([]byte(c.card), c.version, func(content []byte) (wire.Signature, error) {
			signed = content
			return wire.Signature{Protected: "P", Signature: "S"}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(signed) != c.content {
			t.Errorf("%s: signed %s, want %s", c.version, signed, c.content)
		}
		var served map[string]json.RawMessage
		if err := json.Unmarshal(out, &served); err != nil {
			t.Fatal(err)
		}
		if string(served["signatures"]) != `[{"protected":"P","signature":"S"}]` {
			t.Errorf("%s: signatures %s", c.version, served["signatures"])
		}
		delete(served, "signatures")
		rest, _ := json.Marshal(served)
		canon, err := jcs.Transform(rest)
		if err != nil || string(canon) != string(signed) {
			t.Errorf("%s: served %s canonicalises to %s, not the signed %s (%v)", c.version, out, canon, signed, err)
		}
		if _, contents, err := CardSignatures(out); err != nil || string(contents[0]) != string(signed) {
			t.Errorf("%s: writ's own reading of its card: %s %v", c.version, contents, err)
		}
	}
}
