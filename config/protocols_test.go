package config

// The protocol table registers the protocols agents[].protocol may name
// (adapters/names): every program that loads a config links it, and so do
// these tests.
import (
	"strings"
	"testing"

	_ "github.com/writ-authz/writ/adapters"
)

// TestGRPCListen: agents[].grpc_listen is required for, and only for, a
// protocol served over gRPC, and is host:port; a gRPC agent with its
// listener loads.
func TestGRPCListen(t *testing.T) {
	grpcAgent := func(extra string) string {
		return strings.Replace(good, "    protocol: acp\n", "    protocol: a2a-grpc\n"+extra, 1)
	}
	for key, cfg := range map[string]string{
		"agents[1].grpc_listen: required":                  grpcAgent(""),
		"agents[1].grpc_listen: \"9443\" is not host:port": grpcAgent("    grpc_listen: '9443'\n"),
		"agents[1].grpc_listen: only for a protocol served over gRPC (a2a-grpc), not \"acp\"": strings.Replace(good,
			"    protocol: acp\n", "    protocol: acp\n    grpc_listen: 127.0.0.1:9443\n", 1),
	} {
		if _, err := Parse([]byte(cfg)); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v", key, err)
		}
	}
	c, err := Parse([]byte(grpcAgent("    grpc_listen: 127.0.0.1:9443\n")))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Agents[1]; a.Protocol != "a2a-grpc" || a.GRPCListen != "127.0.0.1:9443" {
		t.Errorf("agent %+v", a)
	}
}
