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

// TestGRPCRouteBehindEnvoy: behind Envoy, a gRPC agent's route must be /,
// since the path Envoy routed is the call's method; the sidecar alone keeps
// any route (its gRPC door puts the route before the method).
func TestGRPCRouteBehindEnvoy(t *testing.T) {
	grpcAgent := strings.Replace(good, "    protocol: acp\n", "    protocol: a2a-grpc\n    grpc_listen: 127.0.0.1:9443\n", 1)
	for _, envoy := range []string{"envoy: {grpc_listen: 127.0.0.1:9191}\n", "envoy: {ext_proc_listen: 127.0.0.1:9193}\n"} {
		_, err := Parse([]byte(grpcAgent + envoy))
		if err == nil || !strings.Contains(err.Error(), `agents[1].route: "/kyc": behind Envoy`) {
			t.Errorf("%s: got %v", envoy, err)
		}
		root := strings.Replace(grpcAgent, "route: /kyc", "route: /\n    hosts: [kyc.example]", 1)
		if _, err := Parse([]byte(root + envoy)); err != nil {
			t.Errorf("%s, route /: %v", envoy, err)
		}
	}
	if _, err := Parse([]byte(grpcAgent)); err != nil {
		t.Errorf("sidecar only: %v", err)
	}
}
