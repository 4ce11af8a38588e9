package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

type caseInner struct {
	URL   string         `json:"url"`
	Token string         `json:"token"`
	Meta  map[string]any `json:"metadata"`
}

type caseOuter struct {
	Message *caseInner      `json:"message"`
	Items   []caseInner     `json:"items"`
	Raw     json.RawMessage `json:"data"`
	Skip    string          `json:"-"`
}

func TestFieldCase(t *testing.T) {
	fc := FieldCaseOf(&caseOuter{})
	for _, ok := range []string{
		`{"message":{"url":"https://a","token":"t"}}`,
		`{"message":{"metadata":{"URL":"x","Message":1,"Token":2}}}`, // user data: any keys
		`{"data":{"Message":{"URL":1}}}`,                             // raw data: not checked
		`{"items":[{"url":"a"},{"token":"b"}]}`,
		`{"unknown":{"URL":1}}`, // a key the type does not describe: left to the agent
		`{"message":"URL"}`,     // a value, not a key
		`not json at all`,
	} {
		if err := fc.Check([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{"Message":{}}`,
		`{"message":{"url":"a"},"MESSAGE":{"url":"b"}}`,
		`{"message":{"URL":"https://evil"}}`,
		`{"items":[{"url":"a"},{"Token":"b"}]}`,
		`{"message":{"u\u0052L":"https://evil"}}`, // an escaped key decodes to "uRL"
	} {
		err := fc.Check([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), "differs only in case") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

type caseProto struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Message   *caseInner `json:"message"`
	Kind      string     `json:"kind"`
}

// TestFieldCaseProtoNames: proto-JSON readers (the JS SDK's decoders) take a
// field's proto name where its JSON name is absent or null; such a key is
// refused like a case variant.
func TestFieldCaseProtoNames(t *testing.T) {
	fc := FieldCaseOf(caseProto{})
	for _, bad := range []string{
		`{"task_id":"victim"}`,
		`{"taskId":null,"task_id":"victim"}`,
		`{"taskId":"mine","context_id":"victim"}`,
		`{"TASK_ID":"victim"}`,      // a case variant of the proto name
		`{"task\u005fid":"victim"}`, // escaped
	} {
		err := fc.Check([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), "proto name") && !strings.Contains(err.Error(), "differs only in case") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	for _, ok := range []string{
		`{"taskId":"a","contextId":"b","kind":"k"}`,
		`{"message":{"metadata":{"task_id":"user data"}}}`,
		`{"kind_":"x","task__id":"y","_task_id":"z"}`, // not the proto name
	} {
		if err := fc.Check([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A field name with many k's: its Kelvin-sign spelling (3 bytes a letter) is
// longer in bytes than the scan's ASCII buffer.
type caseLong struct {
	K string `json:"kkkkkkkkkkkkkkkkkkkkkkkk"`
}

// TestFieldCaseSuspect: the fast path must send every key a Go decoder could
// fold onto a field name to the full check: non-ASCII keys (whatever their
// length in bytes), escaped keys, ASCII case variants and proto names. It must
// also let a body without such keys through without the full check.
func TestFieldCaseSuspect(t *testing.T) {
	fc := FieldCaseOf(&caseOuter{})
	for _, in := range []string{
		`{"meſſage":{}}`,                             // ſ U+017F
		`{"message":{"token":"a","to\u212aen":"b"}}`, // K U+212A, raw
		`{"me\u017f\u017fage":{}}`,                   // escaped
		`{"m\u0065ssage":{}}`,                        // escaped, folds to itself
		`{"MESSAGE":{}}`,
		"{\"message\" \n:{\"URL\"\t: 1}}",
	} {
		if !fc.suspect([]byte(in)) {
			t.Errorf("not suspect: %s", in)
		}
	}
	for _, in := range []string{
		`{"message":{"url":"https://a","token":"T"}}`,
		`{"message":{"metadata":{"note":"MESSAGE","x":"ſ"}}}`, // non-ASCII in a value
		`{"other":1}`,
	} {
		if fc.suspect([]byte(in)) {
			t.Errorf("suspect: %s", in)
		}
	}

	long := FieldCaseOf(caseLong{})
	kelvin := strings.Repeat("\u212a", 24) // 72 bytes, folds to 24 k's
	body := `{"kkkkkkkkkkkkkkkkkkkkkkkk":"mine","` + kelvin + `":"victim"}`
	var dec caseLong
	if err := json.Unmarshal([]byte(body), &dec); err != nil || dec.K != "victim" {
		t.Fatalf("encoding/json no longer folds the Kelvin sign (%q, %v): revisit this test", dec.K, err)
	}
	if err := long.Check([]byte(body)); err == nil {
		t.Errorf("a 72-byte Kelvin-sign spelling of a field passed the guard")
	}
}
