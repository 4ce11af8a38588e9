package extauthz

import (
	"context"
	"net/http"
	"net/http/httptest"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/proxy/extproc"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
)

// extProcDoor is the world's admission core behind ext_proc, reached through
// a fake Envoy (extproctest) that forwards what writ allows to the agents:
// the fourth front door. metadata and attrs say how Envoy tells writ who the
// caller is (jwt_authn claims, the client certificate's SPIFFE ID).
func (w *world) extProcDoor(metadata *corev3.Metadata, attrs map[string]*structpb.Value) string {
	w.t.Helper()
	ident, err := identity.New(w.cfg.Identity)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(ident.Close)
	ext, err := extproc.New(w.px, ident, w.cfg, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := ext.Listen(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ext.Shutdown(ctx)
	})
	conn, err := grpc.NewClient("passthrough:///"+ext.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { conn.Close() })
	e := &extproctest.Envoy{Client: extprocv3.NewExternalProcessorClient(conn),
		Metadata:   func(*http.Request) *corev3.Metadata { return metadata },
		Attributes: func(*http.Request) map[string]*structpb.Value { return attrs }}
	for _, a := range w.cfg.Agents {
		e.Routes = append(e.Routes, extproctest.Route{Prefix: a.Route, Name: a.Name, Upstream: a.Upstream})
	}
	srv := httptest.NewServer(e)
	w.t.Cleanup(srv.Close)
	return srv.URL
}

// viaBase sends r to base (a door's listener) as a client would.
func (w *world) viaBase(base string, r req) answer {
	w.t.Helper()
	return w.send(base, "writ.test", r)
}
