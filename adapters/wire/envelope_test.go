package wire

import (
	"errors"
	"testing"

	"github.com/writ-authz/writ/task"
)

func TestEnvelope(t *testing.T) {
	names := []string{"jsonrpc", "method", "params", "id"}
	ok := map[string]map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"a"}}`: {"jsonrpc": `"2.0"`, "id": "1", "method": `"tasks/get"`, "params": `{"id":"a"}`},
		// An escaped key is the key itself, for every reader.
		`{"\u006dethod":"m","p\u0061rams":{}}`: {"method": `"m"`, "params": "{}"},
		// Keys that fold onto no name: ignored, as every reader ignores them.
		`{"method":"m"," method":"x","method ":"x","method\u0000":"x","metho\u0064\u200b":"x","ıd":2,"İd":3,"ｍethod":"x"}`: {"method": `"m"`},
		// Case variants deeper down are the params' business.
		`{"params":{"Method":"x","METHOD":"y","params":{"params":1}}}`: {"params": `{"Method":"x","METHOD":"y","params":{"params":1}}`},
		"{\n\t\"method\" : \"m\" \r\n}":                                {"method": `"m"`},
		`{}`:                                                           {},
	}
	for in, want := range ok {
		got, err := Envelope([]byte(in), names...)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: got %d members, want %d", in, len(got), len(want))
		}
		for k, v := range want {
			if string(got[k]) != v {
				t.Errorf("%s: %s = %s, want %s", in, k, got[k], v)
			}
		}
	}
	for _, in := range []string{
		`{"method":"a","Method":"b"}`,
		`{"Method":"b","method":"a"}`,
		`{"METHOD":"b"}`, // a variant alone is still a variant
		`{"params":{},"Params":{}}`,
		`{"params":{},"paramſ":{}}`,        // ſ U+017F folds to s
		`{"params":{},"param\u017f":{}}`,   // the same, escaped
		`{"jſonrpc":"2.0"}`,                // ſ inside
		`{"id":1,"ID":2}`,                  // id
		`{"id":1,"\u0049\u0044":2}`,        // "ID", escaped
		`{"method":"a","method":"b"}`,      // duplicate
		`{"method":"a","\u006dethod":"b"}`, // duplicate after decoding
		`{"x":1,"x":2}`,                    // any top-level duplicate
	} {
		_, err := Envelope([]byte(in), names...)
		if !errors.Is(err, ErrAmbiguousEnvelope) {
			t.Errorf("%s: %v, want ErrAmbiguousEnvelope", in, err)
		}
		if f := FaultOf(err); f == nil || f.Kind != task.KindNotARequest {
			t.Errorf("%s: fault %v, want not_a_request", in, f)
		}
	}
	for _, in := range []string{`[]`, `"x"`, `{"a":1}{"b":2}`, `{"a":1} x`, `{"a":1`, ``} {
		if _, err := Envelope([]byte(in), names...); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", in, err)
		}
	}
}

// TestDuplicateKeyFaults: a duplicate below the request object stays an
// invalid-params fault; only the envelope is an invalid request.
func TestDuplicateKeyFaults(t *testing.T) {
	err := CheckJSON([]byte(`{"params":{"id":"a","id":"b"}}`), 0)
	if f := FaultOf(err); f == nil || f.Kind != task.KindInvalidParams {
		t.Fatalf("params duplicate: %v", f)
	}
}
