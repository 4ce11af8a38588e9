package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/writ-authz/writ/task"
)

func TestDuplicateKeys(t *testing.T) {
	for _, bad := range []string{
		`{"a":1,"a":2}`,
		`{"message":{"taskId":"x"},"message":{}}`,
		`{"x":{"y":1,"z":2,"y":3}}`,
		`[{"k":1},{"k":1,"k":2}]`,
		`{"ab":1,"a\u0062":2}`, // the same key after its escape is decoded
	} {
		err := CheckJSON([]byte(bad), 0)
		if !errors.Is(err, ErrDuplicateKey) {
			t.Errorf("%s: %v", bad, err)
		}
		if f := FaultOf(err); f.Kind != task.KindInvalidParams {
			t.Errorf("%s: fault %v", bad, f)
		}
	}
	for _, ok := range []string{
		`{"a":1,"b":{"a":2}}`, // the same key in different objects
		`[{"k":1},{"k":2}]`,
		`{"a":"a","b":"a"}`, // values are not keys
		`{"a":["a","a"],"b":{"c":"\"a\"","d":"x\\"}}`,
		`"just a string"`,
	} {
		if err := CheckJSON([]byte(ok), 0); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestDuplicateKeysWideObject(t *testing.T) {
	var b []byte
	b = append(b, '{')
	for i := 0; i < 5000; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"k%d":%d`, i, i)
	}
	ok := append(append([]byte{}, b...), '}')
	if err := CheckJSON(ok, 0); err != nil {
		t.Fatalf("wide object: %v", err)
	}
	dup := append(b, `,"k4999":0}`...)
	if err := CheckJSON(dup, 0); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("duplicate past the map threshold: %v", err)
	}
	early := append(b, `,"k3":0}`...)
	if err := CheckJSON(early, 0); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("duplicate of an early key: %v", err)
	}
}

// dupByTokens is the slow, obviously right answer: walk encoding/json's tokens
// and keep one key set per open object.
func dupByTokens(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object, expectKey bool
		keys              map[string]bool
	}
	var stack []*frame
	value := func() { // a value ended: the enclosing object expects a key next
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{object: true, expectKey: true, keys: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				if stack[n-1].keys[t] {
					return true
				}
				stack[n-1].keys[t] = true
				stack[n-1].expectKey = false
				continue
			}
			value()
		default:
			value()
		}
	}
}

// FuzzDuplicateKeys checks the byte scanner against the token walk on every
// well-formed input.
func FuzzDuplicateKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"b":[{"a":1,"a\u0000":2}]}`,
		`{"\"":1,"\\":2,"\\\"":3}`, `[{"k":"k","v":{"k":1}}]`, `{"ab":1,"a\u0062":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		got := duplicateKeys(data) != nil
		if want := dupByTokens(data); got != want {
			t.Fatalf("%q: scanner says duplicate=%v, token walk %v", data, got, want)
		}
	})
}
