package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/exchange"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/authzen"
	"github.com/writ-authz/writ/proxy/egress"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/proxy/extproc"
	"github.com/writ-authz/writ/proxy/grpcsidecar"
	"github.com/writ-authz/writ/proxy/sidecar"
)

// Door is one front door as the assembly runs it: listeners that map the
// admission core's outcomes onto a wire. A door is built over the running
// core (doors, below); Listen opens its listeners and serves in the
// background, and Shutdown stops it.
type Door interface {
	// Name names the door in logs and in writ_component_errors_total (a
	// short, stable word).
	Name() string
	// Listen opens the door's listeners and starts serving on them; an
	// error means nothing of the door listens.
	Listen() error
	// Addrs are the door's listeners as bound, by the configuration key
	// that sets each (e.g. "envoy.grpc_listen"); valid after Listen.
	Addrs() map[string]string
	// Shutdown stops accepting, lets what is in flight finish until ctx
	// ends, then cuts what is left. It returns every error the door met:
	// a listener that stopped serving before, and requests cut.
	Shutdown(ctx context.Context) error
}

// doorParts are what a door is built from: the running core and what the
// doors share.
type doorParts struct {
	cfg   *config.Config
	core  *proxy.Core
	ident *identity.Resolver
	// engine is the decision engine (the AuthZEN applications' rules);
	// bus the event bus (the egress door's token exchanges).
	engine *authz.Engine
	bus    *events.Bus
	log    *slog.Logger
	opts   *options
	// listener hands over WithListener's listener (nil without one), once.
	listener func() net.Listener
	// failed reports a listener that stopped serving while writ runs.
	failed func(component string, err error)
	// warnRouteName warns, once for all doors, that Envoy requests may go
	// unnamed.
	warnRouteName func()
}

// doors are writ's front doors, in the order they open (they stop
// together). Each is one entry: its name and how it is built, nil when the
// configuration does not ask for it. A new door is one more entry.
var doors = []struct {
	name  string
	build func(p *doorParts) (Door, error)
}{
	{"sidecar", newSidecarDoor},
	{"grpc", newGRPCDoor},
	{"ext_authz", newExtAuthzDoor},
	{"ext_proc", newExtProcDoor},
	{"egress", newEgressDoor},
	{"authzen", newAuthZENDoor},
}

// startDoors builds every door the configuration asks for, then opens them
// in order.
func (s *Server) startDoors(context.Context) error {
	var once sync.Once
	p := &doorParts{cfg: s.cfg, core: s.core, ident: s.ident, engine: s.engine, bus: s.bus, log: s.log, opts: &s.opts,
		failed: s.servingFailed,
		listener: func() net.Listener {
			ln := s.listener
			s.listener = nil
			return ln
		},
		warnRouteName: func() {
			if !s.cfg.Envoy.RequiresRouteName() {
				once.Do(func() {
					s.log.Warn("envoy.require_route_name is off: a request whose Envoy route names no agent is routed by writ itself (canonical targets only)")
				})
			}
		}}
	var built []Door
	for _, d := range doors {
		door, err := d.build(p)
		if err != nil {
			return err
		}
		if door != nil {
			built = append(built, door)
		}
	}
	for _, d := range built {
		if err := d.Listen(); err != nil {
			return err
		}
		s.doors = append(s.doors, d)
		s.errs.add(d.Name())
		s.stops = append(s.stops, stop{component: d.Name(), stop: d.Shutdown, together: true})
	}
	return nil
}

// sidecarDoor is the sidecar: writ as a reverse proxy in front of its
// agents, on listen: (HTTPS with tls:).
type sidecarDoor struct {
	p   *doorParts
	web *httpListener
}

func newSidecarDoor(p *doorParts) (Door, error) { return &sidecarDoor{p: p}, nil }

func (d *sidecarDoor) Name() string { return "sidecar" }

func (d *sidecarDoor) Listen() error {
	ln := d.p.listener()
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", d.p.cfg.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	if d.p.cfg.TLS != nil {
		tc, err := newServerTLS(*d.p.cfg.TLS, d.p.log)
		if err != nil {
			return errors.Join(err, ln.Close())
		}
		ln = tls.NewListener(ln, tc)
	}
	sc := sidecar.New(d.p.core, d.p.cfg.Limits, d.p.log, d.p.opts.transport)
	d.web = &httpListener{key: "listen", srv: sc.HTTPServer(ln.Addr().String()), ln: ln,
		failed: func(err error) { d.p.failed(d.Name(), err) }}
	d.web.start()
	return nil
}

func (d *sidecarDoor) Addrs() map[string]string {
	return map[string]string{"listen": d.web.ln.Addr().String()}
}

func (d *sidecarDoor) Shutdown(ctx context.Context) error { return d.web.shutdown(ctx) }

// grpcDoor is the sidecar's gRPC listeners: one per agent served over
// gRPC (agents[].grpc_listen), h2c, or TLS (and mTLS) as tls: says for
// listen.
type grpcDoor struct {
	p     *doorParts
	doors []*grpcsidecar.Door
	keys  []string
}

func newGRPCDoor(p *doorParts) (Door, error) {
	d := &grpcDoor{p: p}
	for i, a := range p.cfg.Agents {
		if a.GRPCListen != "" {
			d.keys = append(d.keys, fmt.Sprintf("agents[%d].grpc_listen", i))
		}
	}
	if len(d.keys) == 0 {
		return nil, nil
	}
	return d, nil
}

func (d *grpcDoor) Name() string { return "grpc" }

func (d *grpcDoor) Listen() error {
	cfg := d.p.cfg
	var creds credentials.TransportCredentials
	if cfg.TLS != nil {
		tc, err := newServerTLS(*cfg.TLS, d.p.log)
		if err != nil {
			return err
		}
		creds = credentials.NewTLS(tc)
	}
	for _, a := range cfg.Agents {
		if a.GRPCListen == "" {
			continue
		}
		door, err := grpcsidecar.New(d.p.core, a, cfg.Limits, grpcsidecar.Options{Creds: creds, Logger: d.p.log})
		if err == nil {
			var ln net.Listener
			if ln, err = net.Listen("tcp", a.GRPCListen); err == nil {
				door.Listen(ln)
				d.doors = append(d.doors, door)
				d.p.log.Info("gRPC: the agent's listener is serving", "agent", a.Name, "addr", door.Addr(), "tls", creds != nil)
				continue
			}
			err = errors.Join(fmt.Errorf("agents %s: grpc_listen: %w", a.Name, err), door.Shutdown(context.Background()))
		}
		return errors.Join(err, d.Shutdown(context.Background()))
	}
	return nil
}

func (d *grpcDoor) Addrs() map[string]string {
	out := map[string]string{}
	for i, door := range d.doors {
		out[d.keys[i]] = door.Addr()
	}
	return out
}

func (d *grpcDoor) Shutdown(ctx context.Context) error {
	var err error
	for _, door := range d.doors {
		err = errors.Join(err, door.Shutdown(ctx))
	}
	d.doors = nil
	return err
}

// extAuthzDoor is Envoy's ext_authz (gRPC and HTTP) over the core, when
// envoy.grpc_listen or envoy.http_listen is set.
type extAuthzDoor struct {
	p   *doorParts
	ext *extauthz.Server
}

func newExtAuthzDoor(p *doorParts) (Door, error) {
	if !p.cfg.Envoy.Enabled() {
		return nil, nil
	}
	ext, err := extauthz.New(p.core, p.ident, p.cfg, p.log)
	if err != nil {
		return nil, err
	}
	return &extAuthzDoor{p: p, ext: ext}, nil
}

func (d *extAuthzDoor) Name() string { return "ext_authz" }

func (d *extAuthzDoor) Listen() error {
	if err := d.ext.Listen(); err != nil {
		return err
	}
	cfg := d.p.cfg
	if cfg.Envoy.DryRun {
		d.p.log.Warn("envoy.dry_run is on: every ext_authz check is answered OK; refusals are only logged")
	}
	d.p.log.Info("Envoy mode: ext_authz is serving", "grpc", d.ext.GRPCAddr(), "http", d.ext.HTTPAddr(),
		"max_request_bytes", cfg.Envoy.BodyLimit(cfg.Limits), "parse_body", cfg.Envoy.ParsesBody(),
		"require_route_name", cfg.Envoy.RequiresRouteName())
	d.p.warnRouteName()
	return nil
}

func (d *extAuthzDoor) Addrs() map[string]string {
	out := map[string]string{}
	if a := d.ext.GRPCAddr(); a != "" {
		out["envoy.grpc_listen"] = a
	}
	if a := d.ext.HTTPAddr(); a != "" {
		out["envoy.http_listen"] = a
	}
	return out
}

func (d *extAuthzDoor) Shutdown(ctx context.Context) error { return d.ext.Shutdown(ctx) }

// extProcDoor is Envoy's ext_proc (requests and answers) over the core,
// when envoy.ext_proc_listen is set.
type extProcDoor struct {
	p   *doorParts
	ext *extproc.Server
}

func newExtProcDoor(p *doorParts) (Door, error) {
	if p.cfg.Envoy.ExtProcListen == "" {
		return nil, nil
	}
	ext, err := extproc.New(p.core, p.ident, p.cfg, p.log)
	if err != nil {
		return nil, err
	}
	return &extProcDoor{p: p, ext: ext}, nil
}

func (d *extProcDoor) Name() string { return "ext_proc" }

func (d *extProcDoor) Listen() error {
	if err := d.ext.Listen(); err != nil {
		return err
	}
	cfg := d.p.cfg
	d.p.log.Info("Envoy mode: ext_proc is serving", "addr", d.ext.Addr(),
		"max_request_bytes", cfg.Envoy.BodyLimit(cfg.Limits), "max_response_bytes", cfg.Envoy.ResponseLimit(),
		"require_route_name", cfg.Envoy.RequiresRouteName())
	d.p.warnRouteName()
	return nil
}

func (d *extProcDoor) Addrs() map[string]string {
	return map[string]string{"envoy.ext_proc_listen": d.ext.Addr()}
}

func (d *extProcDoor) Shutdown(ctx context.Context) error { return d.ext.Shutdown(ctx) }

// egressDoor is the egress listener for the local agent's own calls, when
// egress.listen is set, with the token exchanger its calls' outbound tokens
// come from (its exchanges reported on the event bus).
type egressDoor struct {
	p    *doorParts
	door *egress.Server
	exch *exchange.Exchanger
}

func newEgressDoor(p *doorParts) (Door, error) {
	if !p.cfg.Egress.Enabled() {
		return nil, nil
	}
	return &egressDoor{p: p}, nil
}

func (d *egressDoor) Name() string { return "egress" }

// Listen builds the exchanger and the door here, not when the door is
// built: a start that fails before the doors open leaves no exchanger to
// close.
func (d *egressDoor) Listen() error {
	cfg := d.p.cfg
	exch, err := exchange.New(cfg.Egress.Exchange, exchange.WithEvents(d.p.bus))
	if err != nil {
		return err
	}
	door, err := egress.New(d.p.core, exch, cfg, d.p.log)
	if err == nil {
		err = door.Listen()
	}
	if err != nil {
		exch.Close()
		return err
	}
	d.door, d.exch = door, exch
	e := cfg.Egress
	d.p.log.Info("egress is serving", "addr", door.Addr(), "agent", e.Agent, "targets", len(e.Targets),
		"sts", e.Exchange.Issuer, "link_ttl", e.LinkTTL.String())
	return nil
}

func (d *egressDoor) Addrs() map[string]string {
	return map[string]string{"egress.listen": d.door.Addr()}
}

// Shutdown drains the listener, then closes the exchanger (exchanges still
// in flight are cancelled: their calls are cut already).
func (d *egressDoor) Shutdown(ctx context.Context) error {
	err := d.door.Shutdown(ctx)
	d.exch.Close()
	return err
}

// authzenDoor is the AuthZEN policy decision point, when authzen.listen is
// set (HTTPS with authzen.tls): delegation questions decided by the core as
// the sidecar decides requests, the applications' packages by the engine's
// prepared rules.
type authzenDoor struct {
	p   *doorParts
	pdp *authzen.Server
	tls bool
}

func newAuthZENDoor(p *doorParts) (Door, error) {
	if !p.cfg.AuthZEN.Enabled() {
		return nil, nil
	}
	return &authzenDoor{p: p}, nil
}

func (d *authzenDoor) Name() string { return "authzen" }

func (d *authzenDoor) Listen() error {
	cfg := d.p.cfg
	var tc *tls.Config
	if t := cfg.AuthZEN.TLS; t != nil {
		var err error
		if tc, err = newServerTLS(*t, d.p.log); err != nil {
			return fmt.Errorf("authzen.tls: %w", err)
		}
	}
	pdp, err := authzen.New(d.p.core, engineRules(d.p.engine), d.p.ident, cfg, authzen.Options{TLS: tc, Logger: d.p.log})
	if err != nil {
		return err
	}
	if err := pdp.Listen(); err != nil {
		return err
	}
	d.pdp, d.tls = pdp, tc != nil
	var apps []string
	for _, a := range cfg.AuthZEN.Applications {
		apps = append(apps, a.Name+"="+a.PackageRef())
	}
	d.p.log.Info("AuthZEN: the policy decision point is serving", "addr", pdp.Addr(), "tls", d.tls,
		"delegation_profile", !cfg.AuthZEN.Delegation.Disabled, "applications", apps, "clients", cfg.AuthZEN.Clients)
	return nil
}

func (d *authzenDoor) Addrs() map[string]string {
	return map[string]string{"authzen.listen": d.pdp.Addr()}
}

func (d *authzenDoor) Shutdown(ctx context.Context) error { return d.pdp.Shutdown(ctx) }

// engineRules is the engine's prepared rules as the AuthZEN door takes them.
func engineRules(e *authz.Engine) authzen.Rules {
	return authzen.RulesFunc(func(ref string) (authzen.Rule, error) {
		q, err := e.Prepare(ref)
		if err != nil {
			return nil, err // never a nil *Prepared in a non-nil Rule
		}
		return q, nil
	})
}

var (
	_ Door = (*sidecarDoor)(nil)
	_ Door = (*grpcDoor)(nil)
	_ Door = (*extAuthzDoor)(nil)
	_ Door = (*extProcDoor)(nil)
	_ Door = (*egressDoor)(nil)
	_ Door = (*authzenDoor)(nil)
)

// httpListener is one http.Server serving one listener (the sidecar's, the
// admin API's) until shutdown.
type httpListener struct {
	key string // the configuration key of its address, for errors
	srv *http.Server
	ln  net.Listener
	// failed reports, at once, that serving stopped before shutdown.
	failed func(error)
	// served is closed once Serve has returned.
	served chan struct{}
}

// start serves in the background.
func (h *httpListener) start() {
	h.served = make(chan struct{})
	go func() {
		defer close(h.served)
		if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.failed(fmt.Errorf("%s: serving on %s: %w", h.key, h.ln.Addr(), err))
		}
	}()
}

// shutdown stops accepting, lets requests in flight finish until ctx ends,
// then closes the connections left; its error says requests were cut (a
// listener that stopped serving before was reported by failed).
func (h *httpListener) shutdown(ctx context.Context) error {
	var err error
	if e := h.srv.Shutdown(ctx); e != nil {
		err = errors.Join(fmt.Errorf("%s: draining: %w", h.key, e), h.srv.Close())
	}
	<-h.served
	return err
}
