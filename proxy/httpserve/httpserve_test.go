package httpserve

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// TestRawPath: the target as sent, escapes intact and the query cut; an
// absolute-form target falls back to the URL's escaped path.
func TestRawPath(t *testing.T) {
	for target, want := range map[string]string{
		"/kyc/%6Byc?x=1":                 "/kyc/%6Byc",
		"/a%2Fb":                         "/a%2Fb",
		"http://h.example/k%79c/t?q=%20": "/k%79c/t",
	} {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n")))
		if err != nil {
			t.Fatal(err)
		}
		if got := RawPath(r); got != want {
			t.Errorf("%s: %q, want %q", target, got, want)
		}
	}
}

type recorder struct {
	http.ResponseWriter
	code    int
	flushed bool
}

func (r *recorder) Header() http.Header         { return http.Header{} }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
func (r *recorder) Flush()                      { r.flushed = true }

// TestStatusWriter: the first status is kept, a body without a head is 200,
// Flush reaches the writer below.
func TestStatusWriter(t *testing.T) {
	rec := &recorder{}
	w := &StatusWriter{ResponseWriter: rec}
	w.WriteHeader(http.StatusForbidden)
	w.WriteHeader(http.StatusOK)
	w.Flush()
	if w.Status != http.StatusForbidden || !rec.flushed || w.Unwrap() != rec {
		t.Fatalf("status %d, flushed %v", w.Status, rec.flushed)
	}
	w2 := &StatusWriter{ResponseWriter: &recorder{}}
	if _, err := w2.Write([]byte("x")); err != nil || w2.Status != http.StatusOK {
		t.Fatalf("a body without a head: %d %v", w2.Status, err)
	}
}
