package envoyreq

import (
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/writ-authz/writ/adapters/wire"
)

// TestGRPCMessage: one uncompressed frame is the message; anything else is
// ErrGRPCFraming, a body not sent ErrGRPCUnread, a body error kept.
func TestGRPCMessage(t *testing.T) {
	msg := []byte{0x0a, 0x01, 'x'}
	one := wire.AppendGRPCFrame(nil, wire.GRPCData, msg)
	if got, err := GRPCBody(one, nil); err != nil || string(got) != string(msg) {
		t.Fatalf("%q %v", got, err)
	}
	if got, err := GRPCBody(wire.AppendGRPCFrame(nil, wire.GRPCData, nil), nil); err != nil || len(got) != 0 {
		t.Errorf("an empty message: %q %v", got, err)
	}
	compressed := wire.AppendGRPCFrame(nil, 1, msg)
	for name, b := range map[string][]byte{"two": append(append([]byte(nil), one...), one...), "compressed": compressed,
		"cut": one[:len(one)-1], "header cut": one[:3], "empty": {}, "trailer flag": wire.AppendGRPCFrame(nil, wire.GRPCTrailer, msg)} {
		if _, err := GRPCBody(b, nil); !errors.Is(err, ErrGRPCFraming) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := GRPCBody(nil, nil); !errors.Is(err, ErrGRPCUnread) {
		t.Errorf("no body: %v", err)
	}
	if _, err := GRPCBody(one, wire.ErrBodyTooLarge); !errors.Is(err, wire.ErrBodyTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if !GRPCCall(http.Header{"Content-Type": {"application/grpc+proto"}}) || !GRPCCall(http.Header{"Content-Type": {"application/json", "application/grpc"}}) ||
		GRPCCall(http.Header{"Content-Type": {"application/grpc-web"}}) || GRPCCall(http.Header{}) {
		t.Error("GRPCCall")
	}
}

// TestGRPCAnswer: the edge's status becomes the trailers Envoy sends, its
// details intact and its message percent-encoded; a plain refusal gets the
// code of its HTTP status; a message writ serves is UNIMPLEMENTED.
func TestGRPCAnswer(t *testing.T) {
	info, _ := anypb.New(&errdetails.ErrorInfo{Reason: "SCOPE_MISSING", Domain: "writ"})
	st := &spb.Status{Code: int32(codes.PermissionDenied), Message: "denied – 100%", Details: []*anypb.Any{info}}
	raw, _ := proto.Marshal(st)
	code, h := GRPCAnswer(wire.Rendered{Status: 403, ContentType: wire.GRPCStatus, Body: raw,
		Header: http.Header{"Www-Authenticate": {"Bearer"}, "Content-Type": {"x"}, "Grpc-Status": {"0"}}})
	if code != codes.PermissionDenied || h.Get(GRPCStatusKey) != "7" || h.Get(GRPCMessageKey) != "denied %E2%80%93 100%25" ||
		h.Get("Www-Authenticate") != "Bearer" || h.Get("Content-Type") != "" {
		t.Errorf("%v %v", code, h)
	}
	b, err := base64.RawStdEncoding.DecodeString(h.Get(GRPCDetailsKey))
	var back spb.Status
	if err != nil || proto.Unmarshal(b, &back) != nil || !proto.Equal(&back, st) {
		t.Errorf("details %v %v", &back, err)
	}
	if code, h := GRPCAnswer(wire.Rendered{Status: 404, Body: []byte("404 page not found\n")}); code != codes.NotFound || h.Get(GRPCMessageKey) != "404 page not found" {
		t.Errorf("plain: %v %v", code, h)
	}
	if code, _ := GRPCAnswer(wire.Rendered{Status: 200, ContentType: wire.GRPCMessage, Body: []byte{1}}); code != codes.Unimplemented {
		t.Errorf("a message: %v", code)
	}
	if code, _ := GRPCAnswer(wire.Rendered{Status: 400, ContentType: wire.GRPCStatus, Body: []byte{0xff}}); code != codes.Internal {
		t.Errorf("a broken status: %v", code)
	}
}
