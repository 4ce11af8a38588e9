package redistest

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

func ping(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("address %s is not loopback", s.Addr())
	}
	if line, err := ping(s.Addr()); err != nil || !strings.HasPrefix(line, "+PONG") {
		t.Fatalf("PING: %q %v", line, err)
	}
	s.Stop()
	if s.Running() {
		t.Error("running after Stop")
	}
	if _, err := ping(s.Addr()); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	s.Restart()
	if line, err := ping(s.Addr()); err != nil || !strings.HasPrefix(line, "+PONG") {
		t.Fatalf("PING after Restart: %q %v", line, err)
	}
}

func TestArgs(t *testing.T) {
	s := Start(t, "--requirepass", "s3cret")
	if line, err := ping(s.Addr()); err != nil || !strings.HasPrefix(line, "-NOAUTH") {
		t.Fatalf("PING without the password: %q %v", line, err)
	}
}
