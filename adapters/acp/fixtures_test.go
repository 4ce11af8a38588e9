package acp

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-authz/writ/adapters/wire"
)

const (
	runID     = "3f2c1a9e-5b7d-4c1e-9a2f-6d8e0b4c7a15"
	runID2    = "9d4b7c21-0e6f-4a38-b5c2-7e1f3a9d8c64"
	sessionID = "b6e1d0c2-8f3a-4e5b-9c7d-1a2b3c4d5e6f"
	missingID = "00000000-0000-4000-8000-000000000000"
)

var fixtureDir = filepath.Join("..", "..", "testdata", "acp")

// readRequest reads testdata/acp/<name>.request.http.
func readRequest(t testing.TB, name string) wire.Inbound {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, name+".request.http"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := wire.ReadMessage(raw, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return in
}

// readResponse reads testdata/acp/<name>.response.http: status, content type, body.
func readResponse(t testing.TB, name string) (int, string, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, name+".response.http"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if resp.ContentLength != int64(len(body)) {
		t.Fatalf("%s: Content-Length %d, body %d bytes", name, resp.ContentLength, len(body))
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// fixtureNames lists the cases that have a file with the given suffix.
func fixtureNames(t testing.TB, suffix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b := filepath.Base(f)
		out = append(out, b[:len(b)-len(suffix)])
	}
	return out
}
