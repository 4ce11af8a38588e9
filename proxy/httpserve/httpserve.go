// Package httpserve holds what the doors that serve HTTP themselves (the
// sidecar, egress) read of a request and record of their answer alike: the
// path as it arrived, and the status an answer went out with.
package httpserve

import (
	"net/http"
	"strings"
)

// RawPath is r's path as it arrived: the origin-form request target (HTTP/2:
// :path) before '?', or for any other form the URL's escaped path.
func RawPath(r *http.Request) string {
	if t := r.RequestURI; strings.HasPrefix(t, "/") {
		p, _, _ := strings.Cut(t, "?")
		return p
	}
	return r.URL.EscapedPath()
}

// StatusWriter records the status an answer was sent with, keeping Flush.
type StatusWriter struct {
	http.ResponseWriter
	// Status is the answer's status, 0 before its head is written.
	Status int
}

// WriteHeader implements http.ResponseWriter.
func (w *StatusWriter) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *StatusWriter) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher when the underlying writer does.
func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
