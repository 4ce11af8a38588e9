package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// With -tokens each request carries the next token in turn; without, the
// request file's own.
func TestLoadTokens(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	toks := filepath.Join(t.TempDir(), "tokens.txt")
	if err := os.WriteFile(toks, []byte("t1\nt2\nt3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	req := filepath.Join("..", "request_allow.json")
	res, err := Load(srv.URL, req, toks, 1, 200*time.Millisecond, false)
	if err != nil || res.Errors > 0 || res.Count < 3 {
		t.Fatalf("Load = %+v, %v", res, err)
	}
	mu.Lock()
	if len(seen) != 3 || seen["Bearer t1"] == 0 || seen["Bearer t2"] == 0 || seen["Bearer t3"] == 0 {
		t.Fatalf("authorization headers seen: %v", seen)
	}
	if d := seen["Bearer t1"] - seen["Bearer t3"]; d < 0 || d > 1 {
		t.Fatalf("tokens not taken in turn: %v", seen)
	}
	clear(seen)
	mu.Unlock()
	if _, err := Load(srv.URL, req, "", 1, 50*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("without -tokens: %v", seen)
	}
	for k := range seen {
		if k == "" || k == "Bearer t1" {
			t.Fatalf("without -tokens the request file's token is sent, got %q", k)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(srv.URL, req, empty, 1, 10*time.Millisecond, false); err == nil {
		t.Fatal("an empty token file is not refused")
	}
}
