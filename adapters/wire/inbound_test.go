package wire_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
)

// guardedBody serves data but fails the test if more than max bytes are read
// from it in total.
type guardedBody struct {
	t    *testing.T
	data []byte
	max  int
	read int
}

func (g *guardedBody) Read(p []byte) (int, error) {
	if g.read >= len(g.data) {
		return 0, io.EOF
	}
	n := copy(p, g.data[g.read:])
	g.read += n
	if g.read > g.max {
		g.t.Errorf("body read past %d bytes (now at %d)", g.max, g.read)
	}
	return n, nil
}

func (g *guardedBody) Close() error { return nil }

func newReq(t *testing.T, body io.ReadCloser, contentLength int64) *http.Request {
	t.Helper()
	u, err := url.Parse("http://agent.test/v1/message%3Asend?tenant=acme&x=1&x=2")
	if err != nil {
		t.Fatal(err)
	}
	return &http.Request{
		Method:        http.MethodPost,
		URL:           u,
		Header:        http.Header{"Content-Type": {"application/json"}, "A2a-Version": {"1.0"}},
		Body:          body,
		ContentLength: contentLength,
	}
}

func TestFromHTTPLimits(t *testing.T) {
	const limit = 64
	tests := []struct {
		name          string
		size          int
		contentLength int64 // -1: unknown (chunked)
		readMax       int   // the most the body may be read
		tooLarge      bool
	}{
		{"empty", 0, 0, 1, false},
		{"one byte", 1, 1, 2, false},
		{"exactly at limit, declared", limit, limit, limit + 1, false},
		{"exactly at limit, unknown length", limit, -1, limit + 1, false},
		{"one over, unknown length", limit + 1, -1, limit + 1, true},
		{"far over, unknown length", 100 * limit, -1, limit + 1, true},
		{"one over, declared: never read", limit + 1, limit + 1, 0, true},
		{"far over, declared: never read", 100 * limit, 100 * limit, 0, true},
		{"understated length", limit + 1, 10, limit + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), tt.size)
			g := &guardedBody{t: t, data: data, max: tt.readMax}
			in, err := wire.FromHTTP(newReq(t, g, tt.contentLength), limit)
			if tt.tooLarge {
				if !errors.Is(err, wire.ErrBodyTooLarge) {
					t.Fatalf("err = %v, want ErrBodyTooLarge", err)
				}
				if in.Body != nil {
					t.Errorf("oversized body kept: %d bytes", len(in.Body))
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !bytes.Equal(in.Body, data) {
				t.Errorf("Body = %d bytes, want %d", len(in.Body), len(data))
			}
		})
	}
}

func TestFromHTTPDefaultLimit(t *testing.T) {
	for _, limit := range []int64{0, -5} {
		at := bytes.Repeat([]byte("a"), wire.DefaultMaxBodyBytes)
		in, err := wire.FromHTTP(newReq(t, io.NopCloser(bytes.NewReader(at)), -1), limit)
		if err != nil || len(in.Body) != wire.DefaultMaxBodyBytes {
			t.Errorf("limit %d: body at the default limit: %d bytes, %v", limit, len(in.Body), err)
		}
		over := append(at, 'b')
		_, err = wire.FromHTTP(newReq(t, io.NopCloser(bytes.NewReader(over)), -1), limit)
		if !errors.Is(err, wire.ErrBodyTooLarge) {
			t.Errorf("limit %d: body one over the default: %v, want ErrBodyTooLarge", limit, err)
		}
		g := &guardedBody{t: t, data: over, max: 0}
		_, err = wire.FromHTTP(newReq(t, g, int64(len(over))), limit)
		if !errors.Is(err, wire.ErrBodyTooLarge) {
			t.Errorf("limit %d: declared one over the default: %v, want ErrBodyTooLarge", limit, err)
		}
	}
}

func TestFromHTTPEnvelope(t *testing.T) {
	body := `{"jsonrpc":"2.0"}`
	in, err := wire.FromHTTP(newReq(t, io.NopCloser(strings.NewReader(body)), int64(len(body))), 1024)
	if err != nil {
		t.Fatal(err)
	}
	if in.Method != "POST" {
		t.Errorf("Method = %q", in.Method)
	}
	if in.Path != "/v1/message:send" {
		t.Errorf("Path = %q, want the unescaped /v1/message:send", in.Path)
	}
	if got := in.Query["x"]; len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Errorf("Query[x] = %v", got)
	}
	if in.Query.Get("tenant") != "acme" {
		t.Errorf("Query[tenant] = %q", in.Query.Get("tenant"))
	}
	if in.Header.Get("A2A-Version") != "1.0" || in.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Header = %v", in.Header)
	}
	if string(in.Body) != body {
		t.Errorf("Body = %q", in.Body)
	}

	// No body at all.
	r := newReq(t, nil, 0)
	r.Method = http.MethodGet
	in, err = wire.FromHTTP(r, 1024)
	if err != nil || in.Body != nil || in.Method != "GET" || in.Path != "/v1/message:send" {
		t.Errorf("nil body: %+v, %v", in, err)
	}
}

type failingBody struct{ n int }

func (f *failingBody) Read(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		p[0] = '{'
		return 1, nil
	}
	return 0, errors.New("connection reset")
}
func (f *failingBody) Close() error { return nil }

func TestFromHTTPReadError(t *testing.T) {
	_, err := wire.FromHTTP(newReq(t, &failingBody{n: 3}, -1), 1024)
	if err == nil {
		t.Fatal("read error swallowed")
	}
	if !strings.Contains(err.Error(), "reading request body") || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("err = %q", err)
	}
	if errors.Is(err, wire.ErrBodyTooLarge) {
		t.Errorf("read error reported as too large: %v", err)
	}
}

func TestReadMessage(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`
	crlf := "POST /a2a/v1?tenant=t1 HTTP/1.1\r\nHost: agent.test\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: 59\r\n\r\n" + body
	lf := strings.ReplaceAll(crlf[:strings.Index(crlf, "\r\n\r\n")+4], "\r\n", "\n") + body
	if len(body) != 59 {
		t.Fatalf("test body is %d bytes", len(body))
	}
	tests := []struct {
		name string
		raw  string
	}{
		{"CRLF", crlf},
		{"bare LF", lf},
		{"bare LF, body with CRLF", strings.Replace(lf, "Content-Length: 59", "Content-Length: 61", 1) + "\r\n"},
		{"bare LF, body with blank lines", strings.Replace(lf, "Content-Length: 59", "Content-Length: 61", 1) + "\n\n"},
		// "Keep Content-Length right or leave it out": without one, the body
		// is everything after the blank line.
		{"CRLF, no Content-Length", strings.Replace(crlf, "Content-Length: 59\r\n", "", 1)},
		{"bare LF, no Content-Length", strings.Replace(lf, "Content-Length: 59\n", "", 1)},
		{"bare LF, no Content-Length, a final newline", strings.Replace(lf, "Content-Length: 59\n", "", 1) + "\n"},
		{"lower-case content-length", strings.Replace(crlf, "Content-Length", "content-length", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := wire.ReadMessage([]byte(tt.raw), 0)
			if err != nil {
				t.Fatalf("ReadMessage: %v", err)
			}
			if in.Method != "POST" || in.Path != "/a2a/v1" || in.Query.Get("tenant") != "t1" {
				t.Errorf("envelope = %s %s %v", in.Method, in.Path, in.Query)
			}
			if in.Header.Get("A2A-Version") != "1.0" || in.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Header = %v", in.Header)
			}
			if !strings.HasPrefix(string(in.Body), body) {
				t.Errorf("Body = %q", in.Body)
			}
			want := len(tt.raw) - strings.Index(tt.raw, body)
			if len(in.Body) != want {
				t.Errorf("Body is %d bytes, want %d: %q", len(in.Body), want, in.Body)
			}
		})
	}

	get := "GET /.well-known/agent-card.json HTTP/1.1\nHost: agent.test\n\n"
	in, err := wire.ReadMessage([]byte(get), 0)
	if err != nil || in.Method != "GET" || in.Path != "/.well-known/agent-card.json" || len(in.Body) != 0 {
		t.Errorf("GET: %+v, %v", in, err)
	}

	if _, err := wire.ReadMessage([]byte(crlf), 58); !errors.Is(err, wire.ErrBodyTooLarge) {
		t.Errorf("body over the limit: %v, want ErrBodyTooLarge", err)
	}
	if in, err := wire.ReadMessage([]byte(crlf), 59); err != nil || string(in.Body) != body {
		t.Errorf("body at the limit: %q, %v", in.Body, err)
	}

	for _, garbage := range []string{
		"",
		"hello",
		"\x00\x01\x02",
		"{\"jsonrpc\":\"2.0\"}",
		"POST\r\n\r\n",
		"POST / HTTP/1.1\r\nBad Header Line\r\n\r\n",
	} {
		_, err := wire.ReadMessage([]byte(garbage), 0)
		if err == nil {
			t.Errorf("ReadMessage(%q) accepted garbage", garbage)
			continue
		}
		if !strings.HasPrefix(err.Error(), "not an HTTP request message: ") {
			t.Errorf("ReadMessage(%q) = %q", garbage, err)
		}
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	tests := []struct{ in, want wire.Limits }{
		{wire.Limits{}, wire.Limits{MaxBodyBytes: 1 << 20, MaxJSONDepth: 32}},
		{wire.Limits{MaxBodyBytes: -1, MaxJSONDepth: -1}, wire.Limits{MaxBodyBytes: 1 << 20, MaxJSONDepth: 32}},
		{wire.Limits{MaxBodyBytes: 10, MaxJSONDepth: 3}, wire.Limits{MaxBodyBytes: 10, MaxJSONDepth: 3}},
		{wire.Limits{MaxBodyBytes: 10}, wire.Limits{MaxBodyBytes: 10, MaxJSONDepth: 32}},
	}
	for _, tt := range tests {
		if got := tt.in.WithDefaults(); got != tt.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
