package interop

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-authz/writ/internal/writproc"
	"github.com/writ-authz/writ/proxy/extproc/extproctest"
)

// A door is one way into writ. Each door runs its own `writ serve` in front of
// the same agents; every cell of the matrix runs through every door. To add
// one: a type with these methods whose start runs writ with the door's
// listener and whatever plays the proxy in front of it, added to doors().
type door interface {
	// name is the door's name in the table.
	name() string
	// start runs writ behind the door and returns the base URL clients use
	// (agents are under base + route).
	start(t *testing.T, w *world) *running
}

// running is a started door.
type running struct {
	base string
	proc *writproc.Proc
	// mode is the decision log's mode for this door's decisions.
	mode string
	// records: writ sees the answers, so tasks are recorded (lifecycle lines,
	// listings filtered to the caller, push delivered by writ).
	records bool
	// na are the operations this door cannot carry, with the reason.
	na map[Op]string
}

// doors are the front doors of the matrix.
func doors() []door { return []door{sidecarDoor{}, extAuthzDoor{}, extProcDoor{}} }

var doorOrder = []string{"sidecar", "Envoy ext_authz (gRPC)", "Envoy ext_proc"}

// sidecarDoor is `writ serve`'s own listener.
type sidecarDoor struct{}

func (sidecarDoor) name() string { return "sidecar" }

func (sidecarDoor) start(t *testing.T, w *world) *running {
	dir := t.TempDir()
	listen := writproc.FreeAddr(t) // the cards' public URLs need it first
	log := filepath.Join(dir, "decisions.jsonl")
	p := writproc.Start(t, w.bin, w.config(listen, "http://"+listen, log, "", dir), writproc.Options{Dir: dir, DecisionLog: log})
	return &running{base: p.URL, proc: p, mode: "sidecar", records: true}
}

// extAuthzDoor is Envoy mode: writ's gRPC ext_authz server in front of a
// forwarder that plays Envoy's router (ext_authz filter with the request
// body, raw headers, then the router): an allowed request goes to the agent
// with writ's header mutations, anything else is writ's own answer. Envoy
// mode sees no answers, so follow-ups are decided with
// lifecycle.unknown_tasks: allow, as docs/interop.md says an ext_authz-only
// deployment must.
type extAuthzDoor struct{}

func (extAuthzDoor) name() string { return "Envoy ext_authz (gRPC)" }

func (extAuthzDoor) start(t *testing.T, w *world) *running {
	extra := "lifecycle: {unknown_tasks: allow}\nenvoy: {grpc_listen: '127.0.0.1:0'}\n"
	base, p := startBehindEnvoy(t, w, extra, "gRPC ext_authz", func(p *writproc.Proc) string { return p.GRPCAddr },
		func(conn *grpc.ClientConn) http.Handler {
			f := &forwarder{authz: authv3.NewAuthorizationClient(conn), maxBody: 1 << 20,
				client: &http.Client{Transport: &http.Transport{DisableCompression: true}}}
			for _, r := range w.routes() {
				u, err := url.Parse(r.upstream)
				if err != nil {
					t.Fatal(err)
				}
				f.routes = append(f.routes, fwdRoute{name: r.name, prefix: r.path, upstream: u})
			}
			return f
		})
	return &running{base: base, proc: p, mode: "ext_authz", records: false, na: map[Op]string{
		Push: "ext_authz sees no answers: writ records no task to keep a push config for, so push-config operations are TaskNotFound and a send's config reaches the agent as sent; push needs the sidecar or ext_proc.",
	}}
}

// extProcDoor is Envoy with writ as its ext_proc server: proxy/extproc's
// extproctest.Envoy (the HTTP connection manager with the ext_proc filter in
// writ's deployment modes — request body BUFFERED, response body STREAMED —
// and a router with a prefix route per agent) in front of writ's ext_proc
// listener. ext_proc sees the answers too, so writ records tasks, filters
// listings and delivers push as the sidecar does, with the default
// lifecycle.unknown_tasks: deny.
type extProcDoor struct{}

func (extProcDoor) name() string { return "Envoy ext_proc" }

func (extProcDoor) start(t *testing.T, w *world) *running {
	extra := "envoy: {ext_proc_listen: '127.0.0.1:0'}\n"
	base, p := startBehindEnvoy(t, w, extra, "ext_proc", func(p *writproc.Proc) string { return p.ExtProcAddr },
		func(conn *grpc.ClientConn) http.Handler {
			envoy := &extproctest.Envoy{Client: extprocv3.NewExternalProcessorClient(conn)}
			for _, r := range w.routes() {
				envoy.Routes = append(envoy.Routes, extproctest.Route{Prefix: r.path, Name: r.name, Upstream: r.upstream})
			}
			return envoy
		})
	return &running{base: base, proc: p, mode: "ext_proc", records: true}
}

// startBehindEnvoy runs writ with extra (which opens its Envoy listener, at
// addr(p) once started) behind the Envoy stand-in envoy builds over a gRPC
// connection to that listener, serving on a listener of its own: base is
// where clients reach the stand-in.
func startBehindEnvoy(t *testing.T, w *world, extra, what string, addr func(*writproc.Proc) string,
	envoy func(*grpc.ClientConn) http.Handler) (base string, p *writproc.Proc) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base = "http://" + ln.Addr().String()
	log := filepath.Join(dir, "decisions.jsonl")
	p = writproc.Start(t, w.bin, w.config("127.0.0.1:0", base, log, extra, dir), writproc.Options{Dir: dir, DecisionLog: log})
	if addr(p) == "" {
		t.Fatalf("writ did not log its %s address", what)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr(p), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	srv := &http.Server{Handler: envoy(conn), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return base, p
}

type fwdRoute struct {
	name, prefix string
	upstream     *url.URL
}

// forwarder is the part of Envoy the ext_authz door needs: the ext_authz
// filter (with_request_body pack_as_bytes, encode_raw_headers) and a router
// with a prefix route per agent (prefix_rewrite to the agent's root), chosen
// before the check and named to writ in its context_extensions (writ-agent),
// as deploy/envoy/envoy.yaml does.
type forwarder struct {
	authz   authv3.AuthorizationClient
	routes  []fwdRoute
	maxBody int64
	client  *http.Client
}

var hopByHop = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true}

func (f *forwarder) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, f.maxBody+1))
	if err != nil {
		http.Error(rw, "read error", http.StatusBadRequest)
		return
	}
	partial := int64(len(body)) > f.maxBody
	if partial {
		body = body[:f.maxBody]
	}
	hm := &corev3.HeaderMap{}
	add := func(k, v string) {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	add(":method", r.Method)
	add(":path", r.URL.RequestURI())
	add(":authority", r.Host)
	add(":scheme", "http")
	for k, vs := range r.Header {
		for _, v := range vs {
			add(strings.ToLower(k), v)
		}
	}
	if partial {
		add("x-envoy-auth-partial-body", "true")
	}
	var rt *fwdRoute
	for i := range f.routes {
		p := f.routes[i].prefix
		if (r.URL.Path == p || strings.HasPrefix(r.URL.Path, p+"/")) && (rt == nil || len(p) > len(rt.prefix)) {
			rt = &f.routes[i]
		}
	}
	var ext map[string]string
	if rt != nil {
		ext = map[string]string{"writ-agent": rt.name}
	}
	host, port, _ := net.SplitHostPort(r.RemoteAddr)
	pn, _ := strconv.Atoi(port)
	cr := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(pn)}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host, Scheme: "http", Protocol: r.Proto,
			HeaderMap: hm, RawBody: body, Size: r.ContentLength}}, ContextExtensions: ext}}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	resp, err := f.authz.Check(ctx, cr)
	cancel()
	if err != nil {
		// failure_mode_allow: false — Envoy refuses with 403.
		rw.WriteHeader(http.StatusForbidden)
		return
	}
	if d := resp.GetDeniedResponse(); d != nil {
		for _, h := range d.GetHeaders() {
			rw.Header().Set(h.GetHeader().GetKey(), headerValue(h.GetHeader()))
		}
		st := int(d.GetStatus().GetCode())
		if st == 0 {
			st = http.StatusForbidden
		}
		rw.WriteHeader(st)
		_, _ = io.WriteString(rw, d.GetBody())
		return
	}
	if rt == nil {
		http.NotFound(rw, r)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, rt.prefix)
	if rest == "" {
		rest = "/"
	}
	target := *rt.upstream
	target.Path = strings.TrimSuffix(target.Path, "/") + rest
	target.RawQuery = r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	for k, vs := range r.Header {
		if !hopByHop[k] {
			out.Header[k] = append([]string(nil), vs...)
		}
	}
	out.Header.Set("X-Forwarded-Proto", "http")
	if ok := resp.GetOkResponse(); ok != nil {
		for _, h := range ok.GetHeaders() {
			out.Header.Set(h.GetHeader().GetKey(), headerValue(h.GetHeader()))
		}
		for _, k := range ok.GetHeadersToRemove() {
			out.Header.Del(k)
		}
	}
	up, err := f.client.Do(out)
	if err != nil {
		rw.WriteHeader(http.StatusServiceUnavailable) // Envoy's own answer to a dead upstream
		return
	}
	defer up.Body.Close()
	for k, vs := range up.Header {
		if !hopByHop[k] {
			rw.Header()[k] = vs
		}
	}
	rw.WriteHeader(up.StatusCode)
	fl, _ := rw.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Body.Read(buf)
		if n > 0 {
			if _, werr := rw.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func headerValue(h *corev3.HeaderValue) string {
	if len(h.GetRawValue()) > 0 {
		return string(h.GetRawValue())
	}
	return h.GetValue()
}
