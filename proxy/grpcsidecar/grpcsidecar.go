// Package grpcsidecar is the sidecar's gRPC front door: a gRPC listener in
// front of one agent served over gRPC (agents[].grpc_listen) that admits
// every call through the admission core (proxy.Core.Admit) and maps its
// Outcome: writ's own answer or refusal sent as the call's message or
// status, a Forward relayed to the agent as a gRPC call — the plan's body
// (writ's own encoding of the message it read, the push config stripped),
// the caller's end-to-end metadata with writ's own set — and the agent's
// answer, or each message of its server stream, fed back through the plan
// so the lifecycle sees it as over JSON-RPC. It knows gRPC, never the
// protocol: the edge reads the calls and renders the answers (see the gRPC
// contract in package wire). It is a peer of the other doors and uses only
// the core's exported API.
package grpcsidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/grpcserve"
)

// Door is the gRPC listener of one agent. Safe for concurrent use.
type Door struct {
	core   *proxy.Core
	agent  string // agents[].name: every call is for it
	prefix string // agents[].route without its trailing slash
	conn   *grpc.ClientConn
	limits config.Limits
	log    *slog.Logger
	srv    *grpcserve.Server
	ln     net.Listener
}

// Options are a door's settings besides the core and the agent.
type Options struct {
	// Creds are the listener's transport credentials (TLS, mTLS); nil
	// serves h2c (plaintext HTTP/2).
	Creds credentials.TransportCredentials
	// Upstream are the credentials writ dials the agent with; nil: h2c for
	// an http:// upstream, TLS with the system roots for https://.
	Upstream credentials.TransportCredentials
	Logger   *slog.Logger
}

// New builds the door of agent (a configured agent served over gRPC) over
// the core, with the configured limits.
func New(core *proxy.Core, agent config.Agent, limits config.Limits, o Options) (*Door, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	target, creds, err := upstreamTarget(agent.Upstream, o.Upstream)
	if err != nil {
		return nil, fmt.Errorf("agents %s: upstream: %w", agent.Name, err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{}), grpc.MaxCallRecvMsgSize(proxy.MaxAnswerBytes)))
	if err != nil {
		return nil, fmt.Errorf("agents %s: dialling the upstream: %w", agent.Name, err)
	}
	d := &Door{core: core, agent: agent.Name, prefix: strings.TrimSuffix(agent.Route, "/"), conn: conn,
		limits: limits, log: o.Logger}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(codec{})}
	if o.Creds != nil {
		opts = append(opts, grpc.Creds(o.Creds))
	}
	d.srv = grpcserve.NewProxy(d.handle, int(limits.MaxBodyBytes), opts...)
	return d, nil
}

// upstreamTarget is the dial target and credentials of an agent's upstream
// URL: http:// is h2c, https:// TLS.
func upstreamTarget(upstream string, creds credentials.TransportCredentials) (string, credentials.TransportCredentials, error) {
	scheme, rest, ok := strings.Cut(upstream, "://")
	host, _, _ := strings.Cut(rest, "/")
	if !ok || host == "" {
		return "", nil, fmt.Errorf("%q is not a URL", upstream)
	}
	if creds != nil {
		return "dns:///" + host, creds, nil
	}
	switch scheme {
	case "http":
		return "dns:///" + host, insecureCreds(), nil
	case "https":
		return "dns:///" + host, credentials.NewClientTLSFromCert(nil, ""), nil
	}
	return "", nil, fmt.Errorf("scheme %q is neither http (h2c) nor https", scheme)
}

// Listen serves on ln in the background.
func (d *Door) Listen(ln net.Listener) {
	d.ln = ln
	d.srv.Start(ln)
}

// Addr is the listener's address.
func (d *Door) Addr() string { return d.ln.Addr().String() }

// Shutdown drains the calls in flight until ctx ends, then closes the
// connection to the agent.
func (d *Door) Shutdown(ctx context.Context) error {
	err := d.srv.Shutdown(ctx)
	return errors.Join(err, d.conn.Close())
}

// handle serves one call, whatever its method.
func (d *Door) handle(_ any, ss grpc.ServerStream) error {
	start := time.Now()
	ctx := ss.Context()
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	var req frame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	// A call of this door carries exactly one request message: a second
	// one would be a request writ never decided on.
	var more frame
	if err := ss.RecvMsg(&more); !errors.Is(err, io.EOF) {
		if err == nil {
			err = status.Error(codes.InvalidArgument, "a call carries one request message")
		}
		return err
	}
	inc := d.incoming(ctx, method, req.b)
	out := d.core.Admit(ctx, inc)
	ev := events.Request{Mode: events.ModeGRPC, Route: out.Route, Operation: out.Operation}
	var err error
	if out.Kind == proxy.Forward {
		err = d.forward(ctx, ss, out.Plan, inc, method, &ev)
	} else {
		err = d.answer(ss, out.Answer, out.DecisionID)
	}
	ev.Status, ev.Duration = httpStatusOf(err), time.Since(start)
	d.core.Served(ev)
	return err
}

// incoming is the call as the core reads a request: the method below the
// agent's route, the metadata as headers (canonical keys, every value).
func (d *Door) incoming(ctx context.Context, method string, body []byte) proxy.Incoming {
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	host := ""
	for k, vs := range md {
		if k == ":authority" {
			if len(vs) > 0 {
				host = vs[0]
			}
			continue
		}
		if strings.HasPrefix(k, ":") {
			continue
		}
		ck := http.CanonicalHeaderKey(k)
		h[ck] = append(h[ck], vs...)
	}
	path := d.prefix + method
	inc := proxy.Incoming{Mode: events.ModeGRPC, Method: http.MethodPost, Path: path, RawPath: path, Host: host,
		Route: d.agent, Header: h, Body: body}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			inc.RemoteAddr = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			inc.TLS, inc.PeerCertificates = true, ti.State.PeerCertificates
		}
	}
	return inc
}

// answer sends writ's own answer: a message, or a status (the edge's, or
// the core's plain refusal mapped by its HTTP status).
func (d *Door) answer(ss grpc.ServerStream, r wire.Rendered, decisionID string) error {
	md := toMetadata(r.Header)
	if decisionID != "" {
		md.Set(decisionKey, decisionID)
	}
	if err := ss.SendHeader(md); err != nil {
		return err
	}
	switch r.ContentType {
	case wire.GRPCMessage:
		return ss.SendMsg(&frame{b: r.Body})
	case wire.GRPCStatus:
		return statusOf(r.Body)
	}
	msg := strings.TrimSpace(string(r.Body))
	if r.Status < 300 {
		// An answer of another protocol (writ's directory, its keys): not
		// one a gRPC caller asked for.
		return status.Error(codes.Unimplemented, "not a gRPC method of this agent")
	}
	return status.Error(codeOfHTTP(r.Status), msg)
}

// statusOf is the error of a google.rpc.Status the edge rendered.
func statusOf(b []byte) error {
	var st spb.Status
	if err := proto.Unmarshal(b, &st); err != nil || st.GetCode() == 0 {
		return status.Error(codes.Internal, "writ could not render its answer")
	}
	return status.ErrorProto(&st)
}

// forward relays the call to the agent and its answer back through the plan.
func (d *Door) forward(ctx context.Context, ss grpc.ServerStream, p *proxy.Plan, inc proxy.Incoming, method string, ev *events.Request) error {
	caller := ctx
	out := metadata.NewOutgoingContext(ctx, outgoing(p.Outbound(inc.Header)))
	if p.Streams {
		return d.relay(caller, out, ss, p, method, ev)
	}
	out, cancel := context.WithTimeout(out, d.limits.UpstreamTimeout)
	defer cancel()
	var resp frame
	var hdr, trl metadata.MD
	sent := time.Now()
	err := d.conn.Invoke(out, method, &frame{b: p.Body}, &resp, grpc.Header(&hdr), grpc.Trailer(&trl))
	ev.Upstream = time.Since(sent)
	defer func() { ev.InvalidAnswers = p.InvalidAnswers() }()
	if err != nil {
		if caller.Err() != nil {
			return status.FromContextError(caller.Err()).Err()
		}
		if failed, ok := d.unreached(out, p, err, hdr, ev); ok {
			return d.answer(ss, failed, "")
		}
		st := status.Convert(err)
		raw, merr := proto.Marshal(st.Proto())
		if merr != nil {
			return status.Error(codes.Internal, "reading the agent's status failed")
		}
		// The agent's refusal is observed like any answer (its error event).
		if _, refused := p.Answer(caller, wire.GRPCStatusHTTP(uint32(st.Code())), raw); refused != nil {
			return d.answer(ss, *refused, "")
		}
		if err := d.head(ss, p, hdr); err != nil {
			return err
		}
		ss.SetTrailer(agentMetadata(trl))
		return st.Err()
	}
	body, refused := p.Answer(caller, http.StatusOK, resp.b)
	if refused != nil {
		return d.answer(ss, *refused, "")
	}
	if err := d.head(ss, p, hdr); err != nil {
		return err
	}
	ss.SetTrailer(agentMetadata(trl))
	return ss.SendMsg(&frame{b: body})
}

// unreached reports whether err is the agent not reached (no header from
// it: it never answered) or not in time, and then the plan's failure.
func (d *Door) unreached(out context.Context, p *proxy.Plan, err error, hdr metadata.MD, ev *events.Request) (wire.Rendered, bool) {
	code := status.Code(err)
	timeout := code == codes.DeadlineExceeded && errors.Is(out.Err(), context.DeadlineExceeded)
	if !timeout && (code != codes.Unavailable || len(hdr) > 0) {
		return wire.Rendered{}, false
	}
	failed, failure := p.FailUpstream(timeout)
	ev.UpstreamFailure = failure
	d.log.Warn("upstream call failed", "agent", d.agent, "error", err)
	return failed, true
}

// head sends the answer's header metadata: the agent's, with writ's
// decision id.
func (d *Door) head(ss grpc.ServerStream, p *proxy.Plan, hdr metadata.MD) error {
	md := agentMetadata(hdr)
	h := fromMetadata(md)
	p.AgentHeaders(h) // the agent's copy of writ's mark is not writ's answer
	md = toMetadata(h)
	md.Set(decisionKey, p.DecisionID())
	return ss.SendHeader(md)
}

// relay relays a server stream: each of the agent's messages is a frame the
// plan reads, observes and passes on; the agent's final status is a
// trailer frame. A stream silent for longer than the idle timeout is cut.
func (d *Door) relay(caller, out context.Context, ss grpc.ServerStream, p *proxy.Plan, method string, ev *events.Request) error {
	out, cancel := context.WithCancel(out)
	defer cancel()
	sent := time.Now()
	var cs grpc.ClientStream // nil unless the stream opened
	opened, err := d.conn.NewStream(out, &grpc.StreamDesc{ServerStreams: true}, method)
	if err == nil {
		cs = opened
		err = cs.SendMsg(&frame{b: p.Body})
	}
	if err == nil {
		err = cs.CloseSend()
	}
	var hdr metadata.MD
	if err == nil {
		hdr, err = cs.Header()
	}
	ev.Upstream = time.Since(sent)
	defer func() { ev.InvalidAnswers = p.InvalidAnswers() }()
	if err != nil {
		if caller.Err() != nil {
			return status.FromContextError(caller.Err()).Err()
		}
		if failed, ok := d.unreached(out, p, err, hdr, ev); ok {
			return d.answer(ss, failed, "")
		}
	}
	if err := d.head(ss, p, hdr); err != nil {
		return err
	}
	idle := d.limits.StreamIdleTimeout
	var timedOut atomic.Bool
	timer := time.AfterFunc(idle, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	src := &upstreamFrames{cs: cs, first: err}
	var final error
	failure := p.Stream(out, src, func(b []byte) error {
		timer.Reset(idle)
		frames, ferr := wire.ParseGRPCFrames(b)
		if ferr != nil {
			final = status.Error(codes.Internal, "writ could not relay the stream")
			return ferr
		}
		for _, f := range frames {
			if f.Flag == wire.GRPCTrailer {
				final = statusOf(f.Payload)
				continue
			}
			if err := ss.SendMsg(&frame{b: f.Payload}); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case timedOut.Load():
		d.log.Info("stream closed after the idle timeout", "agent", d.agent, "idle", idle)
	case caller.Err() == nil && failure != "":
		ev.UpstreamFailure = failure
	}
	if cs != nil {
		ss.SetTrailer(agentMetadata(src.trailer()))
	}
	if caller.Err() != nil {
		return status.FromContextError(caller.Err()).Err()
	}
	return final
}

// upstreamFrames is the agent's server stream as the frames the edge's
// stream reader reads: each message, then (when the agent ended the call
// with an error) its status as a trailer frame.
type upstreamFrames struct {
	cs    grpc.ClientStream
	first error // the stream's error before any message
	buf   []byte
	done  bool
	mu    sync.Mutex
	trl   metadata.MD
}

func (u *upstreamFrames) Read(b []byte) (int, error) {
	for len(u.buf) == 0 {
		if u.done {
			return 0, io.EOF
		}
		err := u.first
		if err == nil {
			var m frame
			if err = u.cs.RecvMsg(&m); err == nil {
				u.buf = wire.AppendGRPCFrame(u.buf, wire.GRPCData, m.b)
				continue
			}
		}
		u.done = true
		if u.cs != nil {
			u.mu.Lock()
			u.trl = u.cs.Trailer()
			u.mu.Unlock()
		}
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		st, ok := status.FromError(err)
		if !ok || st.Code() == codes.Canceled || (st.Code() == codes.Unavailable && len(st.Details()) == 0) {
			// The stream broke off (or was cut): not the agent's answer.
			return 0, err
		}
		raw, merr := proto.Marshal(st.Proto())
		if merr != nil {
			return 0, merr
		}
		u.buf = wire.AppendGRPCFrame(u.buf, wire.GRPCTrailer, raw)
	}
	n := copy(b, u.buf)
	u.buf = u.buf[n:]
	return n, nil
}

func (u *upstreamFrames) trailer() metadata.MD {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.trl
}
