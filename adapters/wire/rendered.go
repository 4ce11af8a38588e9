package wire

import "net/http"

// Rendered is a complete HTTP answer an adapter or writ produced (an error, a
// card, a directory). Header holds the answer's headers besides Content-Type
// (Cache-Control, WWW-Authenticate); nil means none.
type Rendered struct {
	Status      int
	ContentType string
	Header      http.Header
	Body        []byte
}
