package grpcsidecar

import (
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/proxy/writheader"
)

// decisionKey is writ's decision id as metadata.
var decisionKey = strings.ToLower(writheader.Decision)

// frame is one message's bytes, which codec passes through: the door
// relays messages it never decodes (the edge does).
type frame struct{ b []byte }

// codec is the protobuf codec for the door's own frames, and proto's for
// every other message (the health service's).
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *frame:
		return m.b, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("grpcsidecar: cannot encode %T", v)
}

func (codec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *frame:
		m.b = append([]byte(nil), data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("grpcsidecar: cannot decode into %T", v)
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// reserved reports metadata that belongs to gRPC's own transport, which a
// call's end carries on its own and a relay never copies from the other:
// the content type, the user agent, te, every grpc- key (timeouts, codings,
// statuses), and the pseudo-headers.
func reserved(k string) bool {
	k = strings.ToLower(k)
	switch k {
	case "content-type", "user-agent", "te", "host", "content-length", "connection":
		return true
	}
	return strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":")
}

// outgoing is the metadata of the call to the agent: the headers the plan
// forwards (the caller's end-to-end ones, writ's own set), but gRPC's own.
func outgoing(h http.Header) metadata.MD {
	md := metadata.MD{}
	for k, vs := range h {
		if !reserved(k) {
			md.Append(strings.ToLower(k), vs...)
		}
	}
	return md
}

// agentMetadata is the agent's header or trailer metadata as the caller
// may get it: without gRPC's own keys.
func agentMetadata(in metadata.MD) metadata.MD {
	md := metadata.MD{}
	for k, vs := range in {
		if !reserved(k) {
			md.Append(k, vs...)
		}
	}
	return md
}

// toMetadata is a rendered answer's headers as metadata (its content type
// and gRPC's own keys left out).
func toMetadata(h http.Header) metadata.MD {
	md := metadata.MD{}
	for k, vs := range h {
		if !reserved(k) && !strings.EqualFold(k, "Cache-Control") {
			md.Append(strings.ToLower(k), vs...)
		}
	}
	return md
}

// fromMetadata is metadata as headers.
func fromMetadata(md metadata.MD) http.Header {
	h := http.Header{}
	for k, vs := range md {
		ck := http.CanonicalHeaderKey(k)
		h[ck] = append(h[ck], vs...)
	}
	return h
}

// codeOfHTTP is the gRPC code of the core's plain refusals, by their HTTP
// status (wire.GRPCCodeOfHTTP: the one mapping every gRPC door uses).
func codeOfHTTP(st int) codes.Code { return codes.Code(wire.GRPCCodeOfHTTP(st)) }

// httpStatusOf is a call's outcome as the HTTP status the served event
// records (gRPC's status as gateways map it).
func httpStatusOf(err error) int { return wire.GRPCStatusHTTP(uint32(status.Code(err))) }
