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
