package jsonkeys

import (
	"encoding/json"
	"testing"

	"github.com/writ-authz/writ/internal/jsonkeys/jsonkeystest"
)

func TestRepeated(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"a":2}`:                                   "a",
		`{"x":{"y":1,"z":2,"y":3}}`:                       "y",
		`[{"k":1},{"k":1,"k":2}]`:                         "k",
		`{"ab":1,"a\u0062":2}`:                            "ab", // the same name once its escape is decoded
		`{"act":{"sub":"a","act":{"sub":"b","sub":"c"}}}`: "sub",
		"{\"\xff\":1,\"\xfe\":2}":                         "\ufffd", // not UTF-8: both read as U+FFFD
		"{\"\xff\":1,\"\\ufffd\":2}":                      "\ufffd",
		"{\"metadata\":{\"\xc0\":\"a\",\"\xc1\":\"b\"}}":  "\ufffd",
	} {
		if got, ok := Repeated([]byte(in)); !ok || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{
		`{"a":1,"b":{"a":2}}`, `[{"k":1},{"k":2}]`, `{"a":"a","b":"a"}`,
		`{"a":["a","a"],"b":{"c":"\"a\"","d":"x\\"}}`, `"just a string"`, `1`,
	} {
		if got, ok := Repeated([]byte(in)); ok {
			t.Errorf("%s: repeats %q", in, got)
		}
	}
	for _, bad := range []string{`}`, `]]`, `{"a`, `{"a\`, `{"\u00zz":1,"\u00zz":2}`} {
		Repeated([]byte(bad)) // not well-formed: it returns, no panic
	}
}

// FuzzRepeated checks the byte scanner against the token walk on every
// well-formed input.
func FuzzRepeated(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"b":[{"a":1,"a\u0000":2}]}`,
		`{"\"":1,"\\":2,"\\\"":3}`, `[{"k":"k","v":{"k":1}}]`, `{"ab":1,"a\u0062":2}`, "{\"\xff\":1,\"\xfe\":2}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			Repeated(data) // any input: it returns, no panic
			return
		}
		_, got := Repeated(data)
		if want := jsonkeystest.RepeatsByTokens(data); got != want {
			t.Fatalf("%q: scanner says duplicate=%v, token walk %v", data, got, want)
		}
	})
}
