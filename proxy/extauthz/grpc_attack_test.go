package extauthz_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2apb"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy/envoyreq"
)

// checker is a go-control-plane ext_authz client to addr.
func checker(t *testing.T, addr string) authv3.AuthorizationClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return authv3.NewAuthorizationClient(conn)
}

// grpcStatusOf is the grpc-status a denied check's headers give the
// client ("" for an allowed check).
func grpcStatusOf(r *authv3.CheckResponse) string {
	for _, h := range r.GetDeniedResponse().GetHeaders() {
		if h.GetHeader().GetKey() == envoyreq.GRPCStatusKey {
			return h.GetHeader().GetValue()
		}
	}
	return ""
}

// TestSecurityGRPCExtAuthzUnreadMessage: a gRPC call is never decided on a
// message writ did not read. With envoy.parse_body off, or a body Envoy cut
// short under allow_partial_body, the check has no message; a 0.3
// ListTasks naming another caller's context would then be read as an
// empty request (every field absent) and allowed, while the agent lists
// that context. Likewise a body of two messages, a compressed one, or a
// frame cut short is not one message writ read.
//
// Threat: a caller's gRPC call is decided on an empty message (headers
// only), or on one message of several, and the agent runs the one writ did
// not read: another caller's context listed, a second request smuggled.
// Defence: the Envoy doors read a gRPC call's body as exactly one
// uncompressed frame (envoyreq.GRPCBody) and refuse a call without it.
func TestSecurityGRPCExtAuthzUnreadMessage(t *testing.T) {
	list := func(w *grpcWorld, contextID string, body func([]byte) []byte, extra ...string) *authv3.CheckResponse {
		t.Helper()
		msg, err := proto.Marshal(&a2apb.ListTasksRequest{ContextId: contextID})
		if err != nil {
			t.Fatal(err)
		}
		md := metadata.Pairs(append([]string{"content-type", "application/grpc", "authorization", "Bearer " + w.Token(proxytest.RetailBot)}, extra...)...)
		resp, err := checker(t, w.authz).Check(t.Context(), grpcCheck("/a2a.v1.A2AService/ListTasks", md, body(msg), grpcAgentName))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	framed := func(m []byte) []byte { return wire.AppendGRPCFrame(nil, wire.GRPCData, m) }
	foreignContext := func(w *grpcWorld) string {
		res, err := a2aClient(t, w.sidecar, w.Token(proxytest.Investigator)).SendMessage(t.Context(), sendParams("Screen Acme"))
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2a.Task).ContextID
	}

	for name, mutate := range map[string]func(*config.Config){
		"parse_body off":     func(c *config.Config) { off := false; c.Envoy.ParseBody = &off },
		"allow_partial_body": func(c *config.Config) { c.Envoy.AllowPartialBody = true },
	} {
		t.Run(name, func(t *testing.T) {
			w := newGRPCWorld(t, mutate)
			ctx := foreignContext(w)
			resp := list(w, ctx, framed)
			if name == "allow_partial_body" {
				// Envoy cut the body short and says so.
				resp = list(w, ctx, func(m []byte) []byte { return framed(m)[:4] }, "x-envoy-auth-partial-body", "true")
			}
			if resp.GetStatus().GetCode() == 0 || grpcStatusOf(resp) == "" || grpcStatusOf(resp) == "0" {
				t.Fatalf("a ListTasks decided without its message was let through: %v", resp)
			}
		})
	}

	w := newGRPCWorld(t, nil)
	ctx := foreignContext(w)
	if resp := list(w, ctx, framed); resp.GetStatus().GetCode() == 0 {
		t.Errorf("another caller's context listed: %v", resp)
	}
	if resp := list(w, "", framed); resp.GetStatus().GetCode() != 0 {
		t.Errorf("an own listing refused: %v", resp)
	}
	for name, body := range map[string]func([]byte) []byte{
		"two messages": func(m []byte) []byte { return append(framed(m), framed(nil)...) },
		"compressed":   func(m []byte) []byte { b := framed(m); b[0] = 1; return b },
		"cut short":    func(m []byte) []byte { return framed(m)[:len(framed(m))-1] },
		"unframed":     func(m []byte) []byte { return m },
		"no body":      func([]byte) []byte { return nil },
	} {
		resp := list(w, "", body)
		if resp.GetStatus().GetCode() == 0 || grpcStatusOf(resp) != "3" {
			t.Errorf("%s: %v (grpc-status %q)", name, resp, grpcStatusOf(resp))
		}
	}
}

// TestGRPCOverHTTPExtAuthz: the HTTP ext_authz server refuses a gRPC call
// (it is given neither the call's metadata nor its peer), as a gRPC status
// Envoy's local reply passes on: nothing is decided on part of a call.
func TestGRPCOverHTTPExtAuthz(t *testing.T) {
	w := newGRPCWorld(t, func(c *config.Config) { c.Envoy.HTTPListen = "127.0.0.1:0" })
	addr := w.Server.ListenerAddr("envoy.http_listen")
	msg, _ := proto.Marshal(&a2apb.ListTasksRequest{})
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/a2a.v1.A2AService/ListTasks",
		bytes.NewReader(wire.AppendGRPCFrame(nil, wire.GRPCData, msg)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Authorization", "Bearer "+w.Token(proxytest.Investigator))
	req.Header.Set("Writ-Agent", grpcAgentName)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Grpc-Status") != "3" || resp.Header.Get("Grpc-Message") == "" {
		t.Errorf("%d %v", resp.StatusCode, resp.Header)
	}
}
