package sidecar_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
)

// TestSlowLoris: a client that never finishes its headers is cut off.
//
// Threat: slow-loris clients exhaust connections. Defence: a header read
// timeout.
func TestSlowLoris(t *testing.T) {
	up := proxytest.NewFakeAgent(t, nil)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, func(c *config.Config) {
		c.Limits.ReadHeaderTimeout = 200 * time.Millisecond
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.Srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	_, err = conn.Read(buf) // the server closes (or answers 408) once the header timeout passes
	if err == nil && !strings.Contains(string(buf), "408") {
		t.Fatalf("slow headers answered %q", buf)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatal("the server kept a slow-loris connection open")
	}
}
