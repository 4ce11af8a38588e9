package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Inbound is one HTTP request as an adapter sees it, whether it came to the sidecar
// or through an Envoy CheckRequest. Body is the whole body, already bounded by the
// caller of the adapter (see Limits).
type Inbound struct {
	Method string
	// Path is the URL path, already unescaped.
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// Limits bound what an adapter accepts. Zero fields take the defaults.
type Limits struct {
	// MaxBodyBytes is the largest body accepted (default 1 MiB).
	MaxBodyBytes int64
	// MaxJSONDepth is the deepest nesting of objects and arrays accepted (default 32).
	MaxJSONDepth int
}

// Default limits.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxJSONDepth = 32
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxJSONDepth <= 0 {
		l.MaxJSONDepth = DefaultMaxJSONDepth
	}
	return l
}

// FromHTTP reads r into an Inbound, reading at most limit+1 body bytes so that an
// oversized body is detected without reading it all. It reports ErrBodyTooLarge
// when the body is over the limit.
func FromHTTP(r *http.Request, limit int64) (Inbound, error) {
	in := Inbound{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header}
	if r.Body == nil {
		return in, nil
	}
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if r.ContentLength > limit {
		return in, ErrBodyTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return in, fmt.Errorf("reading request body: %w", err)
	}
	if int64(len(body)) > limit {
		return in, ErrBodyTooLarge
	}
	in.Body = body
	return in, nil
}

// ReadMessage parses a whole HTTP/1.1 request message (request line, headers, blank
// line, body) as stored in fixtures and accepted by `writ inspect`.
//
// A message whose head names no Content-Length (nor Transfer-Encoding) has
// everything after the blank line as its body, as a hand-written request file
// means it; http.ReadRequest alone would read no body at all.
func ReadMessage(raw []byte, limit int64) (Inbound, error) {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(withLength(normalizeHead(raw)))))
	if err != nil {
		return Inbound{}, fmt.Errorf("not an HTTP request message: %w", err)
	}
	defer r.Body.Close()
	return FromHTTP(r, limit)
}

// ReadExample reads a request message as writ's tools do (writ inspect,
// writ eval, the representative request writ decides at start): as
// ReadMessage, but a body over limit is kept, cut one byte over, so that the
// adapter answers it with the protocol's too-large error rather than the
// tool refusing the file.
func ReadExample(raw []byte, limit int64) (Inbound, error) {
	in, err := ReadMessage(raw, limit)
	if errors.Is(err, ErrBodyTooLarge) {
		in, err = ReadMessage(raw, int64(len(raw)))
		if err == nil && int64(len(in.Body)) > limit {
			in.Body = bytes.Clone(in.Body[:limit+1])
		}
	}
	return in, err
}

// withLength adds a Content-Length to a message head that frames its body
// neither way, counting what follows the head.
func withLength(msg []byte) []byte {
	head, body, found := bytes.Cut(msg, []byte("\r\n\r\n"))
	if !found || len(body) == 0 {
		return msg
	}
	for _, line := range bytes.Split(head, []byte("\r\n"))[1:] {
		name, _, _ := bytes.Cut(line, []byte(":"))
		name = bytes.TrimSpace(name)
		if bytes.EqualFold(name, []byte("Content-Length")) || bytes.EqualFold(name, []byte("Transfer-Encoding")) {
			return msg
		}
	}
	out := make([]byte, 0, len(msg)+32)
	out = append(out, head...)
	out = append(out, "\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}

// normalizeHead turns bare LF line ends in the message head into CRLF, so
// hand-edited request files work too. The body is left untouched.
func normalizeHead(raw []byte) []byte {
	if bytes.Contains(raw, []byte("\r\n")) {
		return raw
	}
	head, body, found := bytes.Cut(raw, []byte("\n\n"))
	if !found {
		return []byte(strings.ReplaceAll(string(raw), "\n", "\r\n"))
	}
	out := make([]byte, 0, len(raw)+64)
	out = append(out, bytes.ReplaceAll(head, []byte("\n"), []byte("\r\n"))...)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}
