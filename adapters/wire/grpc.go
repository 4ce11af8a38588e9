package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The contract between a gRPC door and the edge of a protocol served over
// gRPC (adapters.Protocol.GRPC). The door knows gRPC, never the protocol:
//
//   - A call reaches the edge as an Inbound: Method POST, Path the call's
//     full method name ("/package.Service/Method"), Header the call's
//     metadata (canonical keys, every value as sent), Body the one request
//     message's bytes.
//   - A whole answer (Rendered: a fault, writ's own answer; the body a Plan
//     passes on) is one message (ContentType GRPCMessage), sent with status
//     OK, or a google.rpc.Status (GRPCStatus), the call's final status with
//     its details.
//   - The door feeds the agent's whole answer to the plan with status 200
//     and the message, or with GRPCStatusHTTP of the status code and the
//     google.rpc.Status; and a server stream as frames (AppendGRPCFrame),
//     the messages and, when the agent ended the call with an error, one
//     GRPCTrailer frame holding its google.rpc.Status. The edge's stream
//     reader reads those frames and passes each on as it came; its stream
//     faults are GRPCTrailer frames too, which end the call.
const (
	// GRPCMessage is the content type of a rendered answer that is one
	// response message.
	GRPCMessage = "application/grpc+proto"
	// GRPCStatus is the content type of a rendered answer that is a
	// google.rpc.Status: the call fails with it.
	GRPCStatus = "application/grpc-status+proto"
	// GRPCContentType is the content type a gRPC call itself carries
	// (with an optional "+proto" or "+codec" suffix).
	GRPCContentType = "application/grpc"
)

// Frame flags: a message, or the trailer that ends a stream with a status
// (the gRPC-Web convention for trailers in the body).
const (
	GRPCData    byte = 0x00
	GRPCTrailer byte = 0x80
)

// grpcFrameHeader is a frame's flag byte and big-endian length.
const grpcFrameHeader = 5

// AppendGRPCFrame appends one frame (gRPC's length-prefixed message) of
// payload with flag to dst.
func AppendGRPCFrame(dst []byte, flag byte, payload []byte) []byte {
	var h [grpcFrameHeader]byte
	h[0] = flag
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	return append(append(dst, h[:]...), payload...)
}

// GRPCFrame is one frame read back: its flag, its payload, and its exact
// bytes (to pass on).
type GRPCFrame struct {
	Flag    byte
	Payload []byte
	Raw     []byte
}

// ErrFrameTooLarge is a frame longer than the reader's bound.
var ErrFrameTooLarge = errors.New("grpc frame exceeds the size limit")

// GRPCFrameReader reads frames from a stream, each at most max bytes.
type GRPCFrameReader struct {
	r   io.Reader
	max int
}

// NewGRPCFrameReader reads frames from r; max bounds a frame's payload (0:
// DefaultMaxEventBytes, as for SSE events).
func NewGRPCFrameReader(r io.Reader, maxBytes int) *GRPCFrameReader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxEventBytes
	}
	return &GRPCFrameReader{r: r, max: maxBytes}
}

// Next reads the next frame; io.EOF at a clean end, io.ErrUnexpectedEOF in
// the middle of a frame.
func (g *GRPCFrameReader) Next() (GRPCFrame, error) {
	var h [grpcFrameHeader]byte
	if _, err := io.ReadFull(g.r, h[:]); err != nil {
		return GRPCFrame{}, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if uint64(n) > uint64(g.max) {
		return GRPCFrame{}, fmt.Errorf("%w (%d > %d bytes)", ErrFrameTooLarge, n, g.max)
	}
	raw := make([]byte, grpcFrameHeader+int(n))
	copy(raw, h[:])
	if _, err := io.ReadFull(g.r, raw[grpcFrameHeader:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return GRPCFrame{}, err
	}
	return GRPCFrame{Flag: h[0], Payload: raw[grpcFrameHeader:], Raw: raw}, nil
}

// ParseGRPCFrames splits bytes that hold whole frames (what a door is handed
// for one stream event) into them.
func ParseGRPCFrames(b []byte) ([]GRPCFrame, error) {
	var out []GRPCFrame
	for len(b) > 0 {
		if len(b) < grpcFrameHeader {
			return nil, io.ErrUnexpectedEOF
		}
		n := binary.BigEndian.Uint32(b[1:grpcFrameHeader])
		if uint64(len(b)-grpcFrameHeader) < uint64(n) {
			return nil, io.ErrUnexpectedEOF
		}
		end := grpcFrameHeader + int(n)
		out = append(out, GRPCFrame{Flag: b[0], Payload: b[grpcFrameHeader:end], Raw: b[:end]})
		b = b[end:]
	}
	return out, nil
}

// GRPCStatusHTTP is the HTTP status of a gRPC status code (the mapping
// gRPC gateways use), for a door's events and for an edge's reading of the
// agent's status.
func GRPCStatusHTTP(code uint32) int {
	switch code {
	case 0:
		return 200
	case 1:
		return 499
	case 3, 9, 11:
		return 400
	case 4:
		return 504
	case 5:
		return 404
	case 6, 10:
		return 409
	case 7:
		return 403
	case 8:
		return 429
	case 12:
		return 501
	case 14:
		return 503
	case 16:
		return 401
	}
	return 500
}

// GRPCCodeOfHTTP is the gRPC status code of an answer that has only an HTTP
// status (the core's plain refusals: a target not in canonical form, a path
// no route serves, a route that names no agent): gRPC's own mapping of HTTP
// statuses, made finer where the status says more. Every gRPC door answers
// such a refusal with this code, so a call refused before any protocol was
// chosen gets one status whichever door it came through.
func GRPCCodeOfHTTP(status int) uint32 {
	switch status {
	case 400, 415:
		return 3 // INVALID_ARGUMENT
	case 401:
		return 16 // UNAUTHENTICATED
	case 403:
		return 7 // PERMISSION_DENIED
	case 404:
		return 5 // NOT_FOUND
	case 413, 429:
		return 8 // RESOURCE_EXHAUSTED
	case 502, 503:
		return 14 // UNAVAILABLE
	case 504:
		return 4 // DEADLINE_EXCEEDED
	}
	return 13 // INTERNAL
}
