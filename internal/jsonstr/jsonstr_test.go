package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAgreesWithEncodingJSON: every string encodes to what encoding/json
// decodes back to itself (invalid UTF-8 as U+FFFD), and, but for the HTML
// characters encoding/json escapes, to the same bytes.
func TestAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "\n\r\t\x00\x1f\x7f", "é€😀", "\u2028\u2029", "bad\xffutf8\xc3", "<a>&'"} {
		got := Append(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s does not decode: %v", s, got, err)
		}
		if want := roundTrip(s); back != want {
			t.Errorf("%q: decodes to %q, want %q", s, back, want)
		}
		std, _ := json.Marshal(s)
		stdS := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(std))
		if string(got) != stdS {
			t.Errorf("%q: %s, encoding/json %s", s, got, stdS)
		}
	}
}

// FuzzAppend: any string round-trips through encoding/json's decoder.
func FuzzAppend(f *testing.F) {
	f.Add("a\"b\\c\x00\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(Append(nil, s), &back); err != nil || back != roundTrip(s) {
			t.Fatalf("%q: %q %v", s, back, err)
		}
	})
}

// roundTrip is s as encoding/json gives it back: each invalid byte U+FFFD.
func roundTrip(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}
