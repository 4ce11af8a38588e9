package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// envelopeByTokens is the token-walk Envelope that ValidEnvelope replaced
// (json.Decoder tokens, each member decoded as a json.RawMessage): the oracle
// the byte scanner is fuzzed against.
func envelopeByTokens(data []byte, names ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	out := make(map[string]json.RawMessage, len(names))
	seen := make(map[string]bool, len(names))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%w: key %q appears twice", ErrAmbiguousEnvelope, key)
		}
		seen[key] = true
		exact := false
		for _, name := range names {
			if key == name {
				exact = true
				out[key] = raw
				break
			}
		}
		if exact {
			continue
		}
		for _, name := range names {
			if strings.EqualFold(key, name) {
				return nil, fmt.Errorf("%w: key %q differs from %q only in case; member names are case-sensitive", ErrAmbiguousEnvelope, key, name)
			}
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("%w: unterminated object", ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the object", ErrMalformed)
	}
	return out, nil
}

// sameEnvelope compares two Envelope results: the same members, or errors of
// the same class (and the same message for an ambiguous envelope).
func sameEnvelope(a map[string]json.RawMessage, aerr error, b map[string]json.RawMessage, berr error) error {
	switch {
	case errors.Is(aerr, ErrAmbiguousEnvelope) || errors.Is(berr, ErrAmbiguousEnvelope):
		if aerr == nil || berr == nil || aerr.Error() != berr.Error() {
			return fmt.Errorf("ambiguity: %w vs %w", aerr, berr)
		}
		return nil
	case (aerr != nil) != (berr != nil):
		return fmt.Errorf("error %w vs %w", aerr, berr)
	case aerr != nil:
		if !errors.Is(aerr, ErrMalformed) || !errors.Is(berr, ErrMalformed) {
			return fmt.Errorf("error class %w vs %w", aerr, berr)
		}
		return nil
	}
	if len(a) != len(b) {
		return fmt.Errorf("%d members vs %d", len(a), len(b))
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return fmt.Errorf("member %q: %q vs %q", k, v, w)
		}
	}
	return nil
}

var envelopeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a"}}`,
	`{"\u006dethod":"m","p\u0061rams":{}}`,
	`{"method":"m"," method":"x","method ":"x","method\u0000":"x","metho\u0064\u200b":"x","ıd":2,"İd":3,"ｍethod":"x"}`,
	`{"params":{"Method":"x","METHOD":"y","params":{"params":1}}}`,
	"{\n\t\"method\" : \"m\" \r\n}", `{}`, ` { } `, `{"id" : -1.5e+3 , "params":[1,{"a":"}"}] ,"method":"\"}\\"}`,
	`{"method":"a","Method":"b"}`, `{"params":{},"paramſ":{}}`, `{"id":1,"\u0049\u0044":2}`,
	`{"method":"a","\u006dethod":"b"}`, `{"x":1,"x":2}`, "{\"m\xffethod\":1,\"m\xfeethod\":2}",
	`{"id":null,"jsonrpc":true,"method":false,"params":"x"}`, `[]`, `"x"`, `1`, `{"a":1`, `{"a":1} x`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"ID":18}`,
	`{"\ud800":1,"\ufffd":2}`, `{"\ud800":1,"\udc00":2}`,
}

// TestEnvelopeMatchesTokens: the byte scanner reads what the token walk reads.
func TestEnvelopeMatchesTokens(t *testing.T) {
	names := []string{"jsonrpc", "method", "params", "id"}
	for _, s := range envelopeSeeds {
		got, gerr := Envelope([]byte(s), names...)
		want, werr := envelopeByTokens([]byte(s), names...)
		if !json.Valid([]byte(s)) {
			if !errors.Is(gerr, ErrMalformed) {
				t.Errorf("%q: %v, want ErrMalformed", s, gerr)
			}
			continue
		}
		if err := sameEnvelope(got, gerr, want, werr); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// FuzzEnvelope checks the byte scanner against the token walk on every
// well-formed input, and that it neither panics nor accepts anything else.
func FuzzEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds {
		f.Add([]byte(s))
	}
	names := []string{"jsonrpc", "method", "params", "id"}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ValidEnvelope(data, names...) // any input: no panic
		got, gerr := Envelope(data, names...)
		if !json.Valid(data) {
			if !errors.Is(gerr, ErrMalformed) {
				t.Fatalf("%q: %v, want ErrMalformed", data, gerr)
			}
			return
		}
		want, werr := envelopeByTokens(data, names...)
		if err := sameEnvelope(got, gerr, want, werr); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
	})
}
