package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

func nest(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestCheckJSONDepth(t *testing.T) {
	tests := []struct {
		name  string
		data  string
		limit int
		deep  bool
	}{
		{"scalar", `1`, 1, false},
		{"string", `"x"`, 1, false},
		{"flat object at limit 1", `{"a":1,"b":"c"}`, 1, false},
		{"siblings do not add depth", `[[1],[2],[3],{"a":4}]`, 2, false},
		{"siblings deeper than limit", `[[1],[2],[[3]]]`, 2, true},
		{"arrays exactly at limit", nest("[", "]", 5, "1"), 5, false},
		{"arrays one over", nest("[", "]", 6, "1"), 5, true},
		{"objects exactly at limit", nest(`{"a":`, "}", 4, "1"), 4, false},
		{"objects one over", nest(`{"a":`, "}", 5, "1"), 4, true},
		{"mixed exactly at limit", `{"a":[{"b":[1]}]}`, 4, false},
		{"mixed one over", `{"a":[{"b":[[1]]}]}`, 4, true},
		{"brackets inside a string", `{"a":"[[[[{{{{"}`, 1, false},
		{"closers inside a string do not lower depth", `[["]]]]]]]", [1]]]`, 2, true},
		{"escaped quote keeps the string open", `["\"[[[[", 1]`, 1, false},
		{"escaped quote then closer", `["a\"]]]]]", [[1]]]`, 2, true},
		{"escaped backslash ends the string", `["\\", [1]]`, 1, true},
		{"escaped backslash at limit", `["\\", [1]]`, 2, false},
		{"unicode escape", `["\u005b\u005b", 1]`, 1, false},
		{"default limit exactly", nest("[", "]", wire.DefaultMaxJSONDepth, ""), 0, false},
		{"default limit one over", nest("[", "]", wire.DefaultMaxJSONDepth+1, ""), 0, true},
		{"negative limit is default", nest("[", "]", wire.DefaultMaxJSONDepth, ""), -3, false},
		{"negative limit is default, over", nest("[", "]", wire.DefaultMaxJSONDepth+1, ""), -3, true},
		{"depth bomb, malformed", strings.Repeat("[", 100000), 32, true},
		{"too deep wins over malformed", `[[[`, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wire.CheckJSON([]byte(tt.data), tt.limit)
			if !tt.deep {
				if err != nil {
					t.Fatalf("CheckJSON(%.60s, %d) = %v, want nil", tt.data, tt.limit, err)
				}
				return
			}
			if !errors.Is(err, wire.ErrTooDeep) {
				t.Fatalf("CheckJSON(%.60s, %d) = %v, want ErrTooDeep", tt.data, tt.limit, err)
			}
			if errors.Is(err, wire.ErrMalformed) {
				t.Errorf("too-deep error also matches ErrMalformed: %v", err)
			}
			limit := tt.limit
			if limit <= 0 {
				limit = wire.DefaultMaxJSONDepth
			}
			if want := fmt.Sprintf("(%d)", limit); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name the limit %s", err, want)
			}
		})
	}
}

func TestCheckJSONMalformed(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		offset int
		detail string
	}{
		{"trailing comma", `{"a":1,}`, 8, "looking for beginning of object key string"},
		{"trailing garbage", `{} x`, 4, "after top-level value"},
		{"two values", `[1] [2]`, 5, "after top-level value"},
		{"trailing garbage after scalar", `1 2`, 3, "after top-level value"},
		{"bad literal", `{"a":tru}`, 9, "in literal true"},
		{"empty", ``, 0, "unexpected end of JSON input"},
		{"whitespace only", "  \n ", 4, "unexpected end of JSON input"},
		{"unterminated array", `[1,2`, 4, "unexpected end of JSON input"},
		{"unterminated string", `"abc`, 4, "unexpected end of JSON input"},
		{"unbalanced closer", `]`, 1, "looking for beginning of value"},
		{"single quotes", `{'a':1}`, 2, "looking for beginning of object key string"},
		{"bare word", `hello`, 1, "looking for beginning of value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wire.CheckJSON([]byte(tt.data), 0)
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("CheckJSON(%q) = %v, want ErrMalformed", tt.data, err)
			}
			if errors.Is(err, wire.ErrTooDeep) {
				t.Errorf("malformed error also matches ErrTooDeep: %v", err)
			}
			msg := err.Error()
			if want := fmt.Sprintf("malformed JSON at byte %d: ", tt.offset); !strings.HasPrefix(msg, want) {
				t.Errorf("message %q, want prefix %q", msg, want)
			}
			if !strings.Contains(msg, tt.detail) {
				t.Errorf("message %q lacks %q", msg, tt.detail)
			}
		})
	}
}

func TestCheckJSONValid(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `true`, `0`, `-1.5e3`, `"\ud83d\ude00"`, " \t\n{\"a\" : [1, 2, {\"b\": null}]}\n ",
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi ] } \" {"}]}}}`,
	} {
		if err := wire.CheckJSON([]byte(s), 5); err != nil {
			t.Errorf("CheckJSON(%q) = %v, want nil", s, err)
		}
	}
}

func TestFaultOf(t *testing.T) {
	deep := wire.CheckJSON([]byte(`[[[1]]]`), 2)
	bad := wire.CheckJSON([]byte(`{`), 2)
	tests := []struct {
		name string
		err  error
		want task.Kind
	}{
		{"body too large", wire.ErrBodyTooLarge, task.KindTooLarge},
		{"body too large wrapped", fmt.Errorf("reading: %w", wire.ErrBodyTooLarge), task.KindTooLarge},
		{"too deep", wire.ErrTooDeep, task.KindTooDeep},
		{"too deep from CheckJSON", deep, task.KindTooDeep},
		{"malformed", wire.ErrMalformed, task.KindMalformed},
		{"malformed from CheckJSON", bad, task.KindMalformed},
		{"other", errors.New("disk on fire"), task.KindInternal},
		{"same text, different error", errors.New(wire.ErrMalformed.Error()), task.KindInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("test setup produced a nil error")
			}
			f := wire.FaultOf(tt.err)
			if f == nil {
				t.Fatal("FaultOf returned nil")
			}
			if f.Kind != tt.want {
				t.Errorf("Kind = %q, want %q", f.Kind, tt.want)
			}
			if f.Message != tt.err.Error() {
				t.Errorf("Message = %q, want %q", f.Message, tt.err.Error())
			}
		})
	}
	if f := wire.FaultOf(nil); f != nil {
		t.Errorf("FaultOf(nil) = %+v, want nil", f)
	}
}

func TestTypeError(t *testing.T) {
	var target struct {
		Params struct {
			N int `json:"n"`
		} `json:"params"`
		List []string       `json:"list"`
		B    bool           `json:"b"`
		M    map[string]any `json:"m"`
		S    string         `json:"s"`
		F    float64        `json:"f"`
		P    *struct{}      `json:"p"`
	}
	tests := []struct {
		in   string
		want string
	}{
		{`{"params":{"n":"x"}}`, `field "params.n" must be a number, not string`},
		{`{"list":"x"}`, `field "list" must be an array, not string`},
		{`{"b":1}`, `field "b" must be a boolean, not number`},
		{`{"m":[1]}`, `field "m" must be an object, not array`},
		{`{"s":{}}`, `field "s" must be a string, not object`},
		{`{"s":true}`, `field "s" must be a string, not bool`},
		{`{"f":"1.5"}`, `field "f" must be a number, not string`},
		{`{"p":3}`, `field "p" must be an object, not number`},
		{`[1]`, `expected an object, got array`},
		{`"x"`, `expected an object, got string`},
	}
	for _, tt := range tests {
		err := json.Unmarshal([]byte(tt.in), &target)
		if err == nil {
			t.Errorf("Unmarshal(%s) succeeded", tt.in)
			continue
		}
		if got := wire.TypeError(err); got != tt.want {
			t.Errorf("TypeError(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var n int
	if got := wire.TypeError(json.Unmarshal([]byte(`"x"`), &n)); got != "expected a number, got string" {
		t.Errorf("top-level int: %q", got)
	}
	var ss []string
	if got := wire.TypeError(json.Unmarshal([]byte(`{}`), &ss)); got != "expected an array, got object" {
		t.Errorf("top-level slice: %q", got)
	}
	// A wrapped type error is still recognised.
	wrapped := fmt.Errorf("params: %w", json.Unmarshal([]byte(`{"b":"no"}`), &target))
	if got := wire.TypeError(wrapped); got != `field "b" must be a boolean, not string` {
		t.Errorf("wrapped: %q", got)
	}
	// Anything else passes through unchanged.
	other := errors.New("unexpected end of JSON input")
	if got := wire.TypeError(other); got != other.Error() {
		t.Errorf("TypeError(other) = %q", got)
	}
}
