package wire

import (
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

// TestCheckJSONRefusesNonUTF8: a body that is not UTF-8 text is malformed.
//
// Threat: bytes that are not UTF-8 become U+FFFD differently in Go (one per
// byte) and in JavaScript (one per sequence), so two keys are one duplicated
// key to one parser and two distinct keys to another, and a value differs
// between writ's policy input and the agent. Defence: such a body is refused
// as malformed JSON before anything reads it.
func TestCheckJSONRefusesNonUTF8(t *testing.T) {
	for _, bad := range []string{
		"{\"\xe2\x82\":1,\"\xff\":2}",
		"{\"a\":\"x\xff\"}",
		"{\"params\":{\"id\":\"t\xc0\xafx\"}}", // an overlong '/'
		"{\"a\":\"\xed\xa0\x80\"}",             // a surrogate encoded in UTF-8
	} {
		if err := CheckJSON([]byte(bad), 0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", bad, err)
		}
		if f := FaultOf(CheckJSON([]byte(bad), 0)); f == nil || f.Kind != task.KindMalformed {
			t.Errorf("%q: fault %v", bad, f)
		}
	}
	if err := CheckJSON([]byte(`{"a":"é ✓ \ud83d\ude00 😀"}`), 0); err != nil {
		t.Errorf("UTF-8 text refused: %v", err)
	}
}
