package authz

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/writ-authz/writ/authz/inputpaths"
	"github.com/writ-authz/writ/task"
)

// decoded is raw decoded generically; the test fails when raw is not JSON.
func decoded(t *testing.T, what string, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: not JSON (%v): %s", what, err, raw)
	}
	return v
}

// checkEncoding: the generated encoding of every member, set, empty and
// changed one at a time, is the value encoding/json gives it.
func checkEncoding[T any](t *testing.T, encode func(*jsonEnc, *T, mask)) {
	t.Helper()
	bases := map[string]func() *T{
		"every member set": func() *T { x := new(T); fill(reflect.ValueOf(x).Elem(), ""); return x },
		"every member empty": func() *T {
			x := new(T)
			empty(reflect.ValueOf(x).Elem())
			return x
		},
		"zero": func() *T { return new(T) },
	}
	checked := 0
	for name, base := range bases {
		b := base()
		ms := append(mutations(reflect.ValueOf(b).Elem(), func(r reflect.Value) reflect.Value { return r }, ""), mutation{name: " none", apply: func(reflect.Value) {}})
		for _, m := range ms {
			x := base()
			m.apply(reflect.ValueOf(x).Elem())
			want, err := json.Marshal(x)
			if err != nil {
				t.Fatal(err)
			}
			e := jsonEnc{}
			encode(&e, x, nil)
			what := name + "," + m.name
			if got, w := decoded(t, what, e.b), decoded(t, what, want); !reflect.DeepEqual(got, w) {
				t.Errorf("%s: encoded\n%s\nencoding/json\n%s", what, e.b, want)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d checks", checked)
	}
}

// TestInputJSON: the decision log's JSON form of the writ/v1 input (and of
// the probe declaration, a member of every kind the generator takes) is
// encoding/json's, member for member: a replay decodes the input the policy
// saw.
func TestInputJSON(t *testing.T) {
	checkEncoding(t, encodeInput)
	checkEncoding(t, encodeProbeInput)
}

// TestInputJSONValues: strings and numbers a caller controls (claims, ids)
// encode as encoding/json decodes them back: escapes, invalid UTF-8, the
// line separators, and numbers at the edges of their notation.
func TestInputJSONValues(t *testing.T) {
	strs := []string{"plain", "quote\" back\\slash", "nl\n tab\t cr\r nul\x00 bell\x07", "bad utf-8 \xff\xfe end",
		"seps \u2028 \u2029", "<html> & 'q'", "ünïcödé ✓ 𝄞", "\ufffd", ""}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 123.456, 1e-6, 1e-7, 1.5e-7, 1e20, 1e21, 1.5e21, 5e-324, math.MaxFloat64, 1700000000}
	claims := map[string]any{"n": json.Number("12.50"), "nested": map[string]any{"list": []any{"a", 1.0, nil, true, map[string]any{}}}}
	for i, s := range strs {
		claims["s"+string(rune('a'+i))] = s
	}
	for i, f := range floats {
		claims["f"+string(rune('a'+i))] = f
	}
	in := &Input{Version: InputVersion, Caller: InputCaller{AgentID: strs[2], Chain: strs, Claims: claims}, Task: InputTask{ID: strs[3]}}
	e := jsonEnc{}
	encodeInput(&e, in, nil)
	want, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, w := decoded(t, "values", e.b), decoded(t, "values", want); !reflect.DeepEqual(got, w) {
		t.Fatalf("encoded\n%s\nencoding/json\n%s", e.b, want)
	}
	// Numbers are written exactly as encoding/json writes them.
	for _, f := range floats {
		e := jsonEnc{}
		e.float(f)
		w, _ := json.Marshal(f)
		if string(e.b) != string(w) {
			t.Errorf("%v: %s, encoding/json %s", f, e.b, w)
		}
	}
	e = jsonEnc{}
	e.anyValue(math.NaN(), nil)
	if string(e.b) != "null" {
		t.Errorf("NaN: %s", e.b)
	}
}

// without is v with the member at path removed (in every element of a list
// on the way).
func without(v any, path []string) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			switch {
			case k != path[0]:
				out[k] = val
			case len(path) > 1:
				out[k] = without(val, path[1:])
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			out[i] = without(el, path)
		}
		return out
	}
	return v
}

// fullInput is an input with every member set, claims among them.
func fullInput() *Input {
	in := new(Input)
	fill(reflect.ValueOf(in).Elem(), "")
	in.Caller.Claims = map[string]any{"sub": "u-1", "email": "a@example.com", "act": map[string]any{"sub": "orchestrator", "act": map[string]any{"sub": "root"}}}
	in.Task.FileURIs = []string{}
	return in
}

// TestMaskEveryPath: masking any member path of the input (every member the
// declaration has, at every depth, and claims by name) removes that member,
// from every element of a list, and nothing else.
func TestMaskEveryPath(t *testing.T) {
	in := fullInput()
	e := jsonEnc{}
	encodeInput(&e, in, nil)
	whole := decoded(t, "whole", e.b)
	paths := append(inputpaths.Paths(), "caller.claims.email", "caller.claims.act.sub", "caller.claims.absent")
	for _, p := range paths {
		if p == "version" {
			continue
		}
		l, err := NewInputLog([]string{inputpaths.Prefix + p})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got := decoded(t, p, l.Of(in).AppendJSON(nil))
		if want := without(whole, strings.Split(p, ".")); !reflect.DeepEqual(got, want) {
			t.Errorf("masking %s:\n%v\nwant\n%v", p, got, want)
		}
		if reflect.DeepEqual(got, whole) && !strings.HasSuffix(p, "absent") {
			t.Errorf("masking %s removes nothing", p)
		}
	}
	// Several masks, one below another: the one above wins.
	l, err := NewInputLog([]string{"input.caller.claims.email", "input.caller", "input.caller.agent_id", "input.request.source_address"})
	if err != nil {
		t.Fatal(err)
	}
	got := decoded(t, "several", l.Of(in).AppendJSON(nil))
	if want := without(without(whole, []string{"caller"}), []string{"request", "source_address"}); !reflect.DeepEqual(got, want) {
		t.Errorf("several masks:\n%v\nwant\n%v", got, want)
	}
	if !slices.Equal(l.Of(in).Masked(), []string{"input.caller.claims.email", "input.caller", "input.caller.agent_id", "input.request.source_address"}) {
		t.Errorf("masked %v", l.Of(in).Masked())
	}
}

// TestNewInputLogRefuses: a mask that names no member of the input is
// refused, with the member meant; the version cannot be masked.
func TestNewInputLogRefuses(t *testing.T) {
	for path, want := range map[string]string{
		"input.caller.sub":        "did you mean input.caller.claims.sub?",
		"input.caller.agent":      "did you mean input.caller.agent_id?",
		"input.caler.agent_id":    "did you mean input.caller.agent_id?",
		"caller.user_id":          "did you mean input.caller.user_id?",
		"input.version":           "cannot be masked",
		"input":                   "the whole input",
		"input.task.parts.bogus":  "input.task.parts has text, file, data",
		"input.caller.claims.":    "names no member",
		"input.caller.claims..x":  "names no member",
		"input.nope":              "names no member",
		"input.request.tenant.id": "names no member",
	} {
		_, err := NewInputLog([]string{path})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}

// TestInputLogRedacts: the record of an input keeps a file part's origin
// only, never its path or query (a presigned URL's credential), and leaves
// the input the policy decided on as it was.
func TestInputLogRedacts(t *testing.T) {
	in := BuildInput(&Facts{Request: &task.Request{Operation: task.OpSend, Message: &task.MessageSummary{
		Parts: task.PartCounts{File: 2}, FileURIs: []string{"https://files.example.com:8443/a/b.pdf?X-Sig=SECRET", "s3://bucket/key?token=SECRET"}}},
		Target: &Target{Name: "t"}})
	l, err := NewInputLog(nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(l.Of(in).AppendJSON(nil))
	if strings.Contains(raw, "SECRET") || strings.Contains(raw, "b.pdf") || strings.Contains(raw, "/key") {
		t.Fatalf("the record holds a file URI's path or query: %s", raw)
	}
	if !strings.Contains(raw, `"file_uris":["https://files.example.com:8443","s3://bucket"]`) {
		t.Errorf("file URIs not recorded as their origins: %s", raw)
	}
	if in.Task.FileURIs[0] != "https://files.example.com:8443/a/b.pdf?X-Sig=SECRET" {
		t.Errorf("the decided input changed: %v", in.Task.FileURIs)
	}
	if v := l.Of(in).Version(); v != InputVersion {
		t.Errorf("version %q", v)
	}
}
