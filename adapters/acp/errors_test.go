package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/task"
)

// allKinds lists every fault kind of the kernel, with its expected ACP code.
var allKinds = map[task.Kind]string{
	task.KindMalformed: CodeInvalidInput, task.KindNotARequest: CodeInvalidInput,
	task.KindUnknownOperation: CodeNotFound, task.KindInvalidParams: CodeInvalidInput,
	task.KindTooLarge: CodeInvalidInput, task.KindTooDeep: CodeInvalidInput,
	task.KindVersionNotSupported: CodeInvalidInput, task.KindContentType: CodeInvalidInput,
	task.KindTaskNotFound: CodeNotFound, task.KindTaskNotCancelable: CodeInvalidInput,
	task.KindTaskTerminal: CodeInvalidInput, task.KindUnsupported: CodeInvalidInput,
	task.KindPushNotSupported: CodeInvalidInput, task.KindExtendedCardNotConfigured: CodeInvalidInput,
	task.KindUnauthenticated: CodeInvalidInput, task.KindDenied: CodeInvalidInput,
	task.KindUpstreamUnavailable: CodeServerError, task.KindUpstreamTimeout: CodeServerError,
	task.KindUpstreamInvalid: CodeServerError, task.KindUnavailable: CodeServerError, task.KindInternal: CodeServerError,
	task.Kind("brand_new"): CodeServerError,
}

func TestRenderFaultKinds(t *testing.T) {
	for kind, code := range allKinds {
		r := RenderFault(&task.Request{}, task.NewFault(kind, "m"))
		var e struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &e); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if r.Status != wire.HTTPStatus(kind) || r.ContentType != "application/json" || e.Code != code ||
			e.Message != "m" || e.Data["kind"] != string(kind) {
			t.Errorf("%s: %d %s %s", kind, r.Status, r.ContentType, r.Body)
		}
	}
	if len(codes)+1 != len(allKinds) {
		t.Errorf("the code table has %d kinds, the test %d", len(codes), len(allKinds)-1)
	}
}

func TestRenderFaultGolden(t *testing.T) {
	f := &task.Fault{Kind: task.KindDenied, Message: "delegation denied", Denials: []task.Denial{
		{Code: "DEPTH_EXCEEDED", Reason: "delegation chain is 5 hops; the limit is 4"},
		{Code: "CLASSIFICATION_EXCEEDED", Reason: "restricted data to an agent cleared for internal"},
	}}
	r := RenderFault(nil, f)
	golden := `{"code":"invalid_input","message":"delegation denied","data":{"kind":"denied","denials":[` +
		`{"code":"DEPTH_EXCEEDED","reason":"delegation chain is 5 hops; the limit is 4"},` +
		`{"code":"CLASSIFICATION_EXCEEDED","reason":"restricted data to an agent cleared for internal"}]}}`
	if r.Status != http.StatusForbidden || string(r.Body) != golden {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	r = RenderFault(nil, &task.Fault{Kind: task.KindUnauthenticated, Message: "who are you",
		Denials: []task.Denial{{Code: "UNAUTHENTICATED", Reason: "no credentials"}}})
	golden = `{"code":"invalid_input","message":"who are you","data":{"kind":"unauthenticated","denials":[{"code":"UNAUTHENTICATED","reason":"no credentials"}]}}`
	if r.Status != http.StatusUnauthorized || string(r.Body) != golden {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	r = RenderFault(nil, task.NewFault(task.KindTaskNotFound, "no run r1"))
	golden = `{"code":"not_found","message":"no run r1","data":{"kind":"task_not_found"}}`
	if r.Status != http.StatusNotFound || string(r.Body) != golden {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	// A fault writ renders reads back as the same fault (a writ upstream).
	ev, err := ParseResponse(&task.Request{Operation: task.OpSend}, http.StatusForbidden, RenderFault(nil, f).Body)
	if err != nil || len(ev) != 1 {
		t.Fatal(ev, err)
	}
	want := *f
	want.Code = http.StatusForbidden
	if !reflect.DeepEqual(*ev[0].Err, want) {
		t.Fatalf("read back %+v", ev[0].Err)
	}
}

func TestRenderStreamFault(t *testing.T) {
	f := &task.Fault{Kind: task.KindDenied, Message: "no", Denials: []task.Denial{{Code: "A", Reason: "a"}, {Code: "B", Reason: "b"}}}
	b := RenderStreamFault(&task.Request{Operation: task.OpStream}, f)
	want := `data: {"type":"error","error":{"code":"invalid_input","message":"no","data":{"kind":"denied","denials":[{"code":"A","reason":"a"},{"code":"B","reason":"b"}]}}}` + "\n\n"
	if string(b) != want {
		t.Fatalf("got %q", b)
	}
	sr := NewStreamReader(&task.Request{TaskID: "r1"}, bytes.NewReader(b), 0)
	_, ev, err := sr.Next()
	if err != nil || len(ev) != 1 || ev[0].Kind != task.EventError || ev[0].TaskID != "r1" ||
		!reflect.DeepEqual(ev[0].Err, f) {
		t.Fatalf("read back %+v, %v", ev, err)
	}
	if _, _, err := sr.Next(); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
}

// TestUpstreamKinds maps upstream statuses and codes to kinds.
func TestUpstreamKinds(t *testing.T) {
	run := &task.Request{Operation: task.OpGet}
	tests := []struct {
		status int
		code   string
		kind   task.Kind
	}{
		{400, CodeInvalidInput, task.KindInvalidParams},
		{422, CodeInvalidInput, task.KindInvalidParams},
		{401, CodeServerError, task.KindUnauthenticated},
		{403, CodeServerError, task.KindDenied},
		{404, CodeNotFound, task.KindTaskNotFound},
		{413, CodeInvalidInput, task.KindTooLarge},
		{415, CodeInvalidInput, task.KindContentType},
		{500, CodeServerError, task.KindInternal},
		{503, CodeServerError, task.KindUpstreamUnavailable},
		{504, CodeServerError, task.KindUpstreamTimeout},
		{0, CodeNotFound, task.KindTaskNotFound},
		{0, CodeInvalidInput, task.KindInvalidParams},
		{0, "teapot", task.KindInternal},
	}
	for _, tc := range tests {
		if got := kindOf(run, tc.code, tc.status); got != tc.kind {
			t.Errorf("%d %s: %s, want %s", tc.status, tc.code, got, tc.kind)
		}
	}
}
