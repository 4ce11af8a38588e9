package envoyreq

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/wire"
)

// A gRPC call behind Envoy. Envoy hands a door the call as an HTTP/2
// request: the path is the method, the headers are the metadata, and the
// body (ext_authz's with_request_body with pack_as_bytes, ext_proc's
// buffered body) is the call's messages as they travelled, each a frame of
// gRPC's length-prefixed framing. The door reads the one request message
// out of its frame (GRPCMessage) and hands the edge exactly what the
// sidecar's gRPC listener hands it: the message's bytes (wire's gRPC
// contract). Envoy answers a gRPC call it does not forward with a
// trailers-only response — HTTP 200, grpc-status, grpc-message — whatever
// status the filter asked for (its local replies to gRPC requests), so
// writ's own answer goes out as the trailers GRPCAnswer gives.

// The trailers of a gRPC status.
const (
	GRPCStatusKey  = "grpc-status"
	GRPCMessageKey = "grpc-message"
	GRPCDetailsKey = "grpc-status-details-bin"
)

// GRPCCall reports whether h are a gRPC call's headers: a content type
// application/grpc or application/grpc+<codec>, Envoy's own test for a gRPC
// request (the one that makes its local replies gRPC statuses). Any value
// counts: a call that sends two content types is still answered as gRPC,
// and the edge refuses the pair.
func GRPCCall(h http.Header) bool {
	for _, v := range h.Values("Content-Type") {
		mt, _, err := mime.ParseMediaType(v)
		if err == nil && (mt == wire.GRPCContentType || strings.HasPrefix(mt, wire.GRPCContentType+"+")) {
			return true
		}
	}
	return false
}

// ErrGRPCFraming is a gRPC call's body that is not exactly one request
// message in gRPC's framing: writ decides on one message, and a second one,
// a compressed one or a cut one would be a request it did not read.
var ErrGRPCFraming = errors.New("the gRPC call's body is not one uncompressed request message")

// ErrGRPCUnread is a gRPC call whose body Envoy did not send (parse_body off,
// a body decided on its headers alone): a gRPC call names its task, its
// push config and its message only in its one message, so it is never
// decided without it.
var ErrGRPCUnread = errors.New("a gRPC call is decided on its request message: Envoy must send the body (with_request_body; envoy.parse_body)")

// GRPCMessage is the one request message in body, the call's frames as
// Envoy buffered them: exactly one frame, uncompressed (flag 0), whole.
func GRPCMessage(body []byte) ([]byte, error) {
	frames, err := wire.ParseGRPCFrames(body)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: a frame is cut short", ErrGRPCFraming)
	case len(frames) == 0:
		return nil, fmt.Errorf("%w: no message", ErrGRPCFraming)
	case len(frames) > 1:
		return nil, fmt.Errorf("%w: %d messages", ErrGRPCFraming, len(frames))
	case frames[0].Flag != wire.GRPCData:
		// Flag 1 is a compressed message (grpc-encoding): the agent would
		// inflate it, writ would read the deflated bytes as the message.
		return nil, fmt.Errorf("%w: frame flag %#x (writ reads the identity encoding only)", ErrGRPCFraming, frames[0].Flag)
	}
	return frames[0].Payload, nil
}

// GRPCBody is the request message of a gRPC call whose body the door read
// as body (err: why it could not): the one message, or why the call cannot
// be decided (ErrGRPCUnread for a body not sent, ErrGRPCFraming). A body
// over the limit keeps its own error, so it is refused as too large.
func GRPCBody(body []byte, err error) ([]byte, error) {
	switch {
	case err != nil:
		return nil, err
	case body == nil:
		return nil, ErrGRPCUnread
	}
	return GRPCMessage(body)
}

// GRPCAnswer is writ's own answer r to a gRPC call as Envoy sends it, a
// status: its code, and the headers of the trailers-only response (the
// status, its message percent-encoded as gRPC says, its details when it has
// any, and the answer's own headers but gRPC's reserved ones and the
// representation's). r is the edge's status (wire.GRPCStatus); a plain
// refusal (no protocol was chosen) has the code of its HTTP status, as in
// the sidecar's gRPC door. A message writ serves itself (a push config writ
// keeps) cannot be sent: Envoy's local reply to a gRPC call carries a
// status only, so the call is refused UNIMPLEMENTED and the door says why.
func GRPCAnswer(r wire.Rendered) (codes.Code, http.Header) {
	st := &spb.Status{}
	switch r.ContentType {
	case wire.GRPCStatus:
		if err := proto.Unmarshal(r.Body, st); err != nil || st.GetCode() == 0 {
			st = &spb.Status{Code: int32(codes.Internal), Message: "writ could not render its answer"}
		}
	case wire.GRPCMessage:
		st.Code, st.Message = int32(codes.Unimplemented),
			"writ answers this call itself, and Envoy sends a gRPC client no message of a filter's: use ext_proc's or writ's own gRPC listener for it"
	default:
		st.Code, st.Message = int32(wire.GRPCCodeOfHTTP(r.Status)), strings.TrimSpace(string(r.Body))
	}
	h := http.Header{}
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		if !grpcReserved(k) {
			h[k] = r.Header[k]
		}
	}
	h.Set(GRPCStatusKey, strconv.Itoa(int(st.GetCode())))
	if st.GetMessage() != "" {
		h.Set(GRPCMessageKey, percentEncode(st.GetMessage()))
	}
	if len(st.GetDetails()) > 0 {
		raw, err := proto.Marshal(st)
		if err == nil { // a Status of strings and Anys always marshals
			h.Set(GRPCDetailsKey, base64.RawStdEncoding.EncodeToString(raw))
		}
	}
	return codes.Code(st.GetCode()), h
}

// grpcReserved reports headers a gRPC answer never takes from a rendered
// one: gRPC's own (the status is GRPCAnswer's), the transport's, and the
// representation's (a trailers-only response has no body).
func grpcReserved(k string) bool {
	k = strings.ToLower(k)
	switch k {
	case "content-type", "content-length", "cache-control", "te", "connection", "user-agent":
		return true
	}
	return strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":")
}

// percentEncode is a status message as grpc-message carries it: every byte
// outside printable ASCII, and '%', as %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
