package wire_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

func md(level any) map[string]any {
	return map[string]any{wire.ClassificationKey: map[string]any{"level": level}}
}

func TestClassificationConstants(t *testing.T) {
	if wire.ClassificationKey != "urn:writ:ext:classification:v1" {
		t.Errorf("ClassificationKey = %q", wire.ClassificationKey)
	}
	if wire.ClassificationHeader != "Writ-Data-Classification" {
		t.Errorf("ClassificationHeader = %q", wire.ClassificationHeader)
	}
}

func TestDeclared(t *testing.T) {
	hdr := func(values ...string) http.Header {
		h := http.Header{}
		for _, v := range values {
			h.Add("writ-data-classification", v) // Add canonicalises the key
		}
		return h
	}
	tests := []struct {
		name     string
		h        http.Header
		metadata []map[string]any
		want     task.Level
		errHas   []string // non-nil: an error is expected, containing each
	}{
		{"nothing declared", nil, nil, "", nil},
		{"empty header, nil maps", http.Header{}, []map[string]any{nil, nil}, "", nil},
		{"other headers and keys ignored", http.Header{"X-Level": {"restricted"}},
			[]map[string]any{{"level": "restricted", "urn:other": map[string]any{"level": "restricted"}}}, "", nil},
		{"header single", hdr("restricted"), nil, task.Restricted, nil},
		{"header public", hdr("public"), nil, task.Public, nil},
		{"header comma list", hdr("public,confidential,internal"), nil, task.Confidential, nil},
		{"header whitespace", hdr("  internal ,\tpublic  "), nil, task.Internal, nil},
		{"header repeated", hdr("public", "restricted", "internal"), nil, task.Restricted, nil},
		{"header unknown", hdr("secret"), nil, "", []string{"header Writ-Data-Classification", `"secret"`, "known: public"}},
		{"header unknown in list", hdr("public, Top-Secret"), nil, "", []string{"header Writ-Data-Classification", `"Top-Secret"`}},
		{"header wrong case", hdr("Restricted"), nil, "", []string{`"Restricted"`}},
		{"header empty element", hdr("public,"), nil, "", []string{`""`}},
		{"header unknown in second value", hdr("restricted", "bogus"), nil, "", []string{`"bogus"`}},
		{"metadata single", nil, []map[string]any{md("confidential")}, task.Confidential, nil},
		{"metadata nil maps skipped", nil, []map[string]any{nil, md("internal"), nil}, task.Internal, nil},
		{"metadata highest wins", nil, []map[string]any{md("restricted"), md("public"), md("internal")}, task.Restricted, nil},
		{"header beats metadata", hdr("restricted"), []map[string]any{md("internal")}, task.Restricted, nil},
		{"metadata beats header", hdr("public"), []map[string]any{nil, md("public"), md("confidential")}, task.Confidential, nil},
		{"extra keys in the object ignored", nil,
			[]map[string]any{{wire.ClassificationKey: map[string]any{"level": "internal", "note": 5}}}, task.Internal, nil},
		{"metadata unknown", nil, []map[string]any{md("secret")}, "", []string{wire.ClassificationKey, `"secret"`, "known: public"}},
		{"metadata empty level", nil, []map[string]any{md("")}, "", []string{wire.ClassificationKey, `""`}},
		{"metadata unknown after a valid one", hdr("restricted"), []map[string]any{md("public"), md("ultra")}, "", []string{`"ultra"`}},
		{"shape: string instead of object", nil, []map[string]any{{wire.ClassificationKey: "restricted"}}, "",
			[]string{wire.ClassificationKey, "must be an object"}},
		{"shape: null", nil, []map[string]any{{wire.ClassificationKey: nil}}, "", []string{"must be an object"}},
		{"shape: array", nil, []map[string]any{{wire.ClassificationKey: []any{"restricted"}}}, "", []string{"must be an object"}},
		{"shape: typed string map", nil, []map[string]any{{wire.ClassificationKey: map[string]string{"level": "public"}}}, "",
			[]string{"must be an object"}},
		{"shape: number level", nil, []map[string]any{md(3.0)}, "", []string{wire.ClassificationKey, `string "level"`}},
		{"shape: bool level", nil, []map[string]any{md(true)}, "", []string{`string "level"`}},
		{"shape: null level", nil, []map[string]any{md(nil)}, "", []string{`string "level"`}},
		{"shape: missing level", nil, []map[string]any{{wire.ClassificationKey: map[string]any{"lvl": "public"}}}, "",
			[]string{`string "level"`}},
		{"shape: object level", nil, []map[string]any{md(map[string]any{"name": "public"})}, "", []string{`string "level"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wire.Declared(tt.h, tt.metadata...)
			if tt.errHas != nil {
				if err == nil {
					t.Fatalf("Declared = %q, nil; want an error", got)
				}
				if got != "" {
					t.Errorf("Declared returned level %q with its error", got)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Declared: %v", err)
			}
			if got != tt.want {
				t.Errorf("Declared = %q, want %q", got, tt.want)
			}
		})
	}
}
