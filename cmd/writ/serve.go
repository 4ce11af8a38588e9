package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/writ-authz/writ/admin"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/exchange"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/authzen"
	egressdoor "github.com/writ-authz/writ/proxy/egress"
	"github.com/writ-authz/writ/proxy/extauthz"
	"github.com/writ-authz/writ/proxy/extproc"
	"github.com/writ-authz/writ/proxy/follow"
	"github.com/writ-authz/writ/proxy/push"
	sidecardoor "github.com/writ-authz/writ/proxy/sidecar"
	"github.com/writ-authz/writ/task"
)

// sidecar is a running writ: the proxy, its listeners and the policy reloader.
type sidecar struct {
	cfg      *config.Config
	core     *proxy.Core
	sidecar  *sidecardoor.Sidecar
	engine   *authz.Engine
	reloader *authz.Reloader
	ident    *identity.Resolver
	store    *stateStore
	srv      *http.Server
	admin    *http.Server
	ln       net.Listener
	adminLn  net.Listener
	// tls: the sidecar's listener serves HTTPS (the tls: section).
	tls bool
	log *slog.Logger
	// envoy is the ext_authz servers (nil unless envoy.grpc_listen or
	// envoy.http_listen is set); they share the proxy, engine and store.
	envoy *extauthz.Server
	// extproc is the ext_proc server (nil unless envoy.ext_proc_listen is set).
	extproc *extproc.Server
	// authzen is the AuthZEN policy decision point (nil unless
	// authzen.listen is set). Wired here for now: the assembly (server/)
	// takes it over.
	authzen *authzen.Server
	// push delivers notifications (nil when push.disabled).
	push *push.Deliverer
	// dlog is the decision log; flushed on shutdown.
	dlog *decisionlog.Log
	// warnedRouteName: the envoy.require_route_name warning was logged.
	warnedRouteName bool
	// egress is the egress door and its token exchanger (nil unless
	// egress.listen is set). EGRESS WIRING (issue 22): moves into the one
	// assembly (server/) at merge.
	egress *egressdoor.Server
	exch   *exchange.Exchanger
}

// startSidecar builds everything from cfg and starts listening. A policy set that
// does not compile or fails its own tests refuses the start.
func startSidecar(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *sidecar, err error) {
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	ident, err := identity.New(cfg.Identity)
	if err != nil {
		return nil, err
	}
	undo = append(undo, ident.Close)
	opt, err := policyOptions(cfg)
	if err != nil {
		return nil, err
	}
	pol, err := loadPolicy(ctx, cfg, opt)
	if err != nil {
		return nil, err
	}
	engine, err := authz.NewEngine(pol, authz.Options{CacheSize: cfg.DecisionCacheSize, DryRun: cfg.DryRun, Logger: log})
	if err != nil {
		return nil, err
	}
	// The embedded policies cannot change while writ runs: no reloader
	// (the admin API answers a reload request 503, and SIGHUP says why).
	var reloader *authz.Reloader
	if !cfg.EmbeddedPolicies() {
		reloader = authz.NewReloader(engine, cfg.Policies, opt, log)
		// Every reload is a moment an operator reads the log: say it again.
		reloader.After = func(authz.ReloadResult) { warnDevelopmentIdentity(log, ident) }
	}
	// Producers emit to the bus from the start; the observers subscribe once
	// built from the producers' snapshots.
	bus := &events.Bus{}
	store, err := openStore(cfg, log, bus)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = store.Close() })
	// One holder per process names its leases on pending deliveries and
	// followed tasks; what another process left unfinished is claimed.
	holder := newHolder()
	deliverer := newDeliverer(cfg, log, bus, store.queue, holder)
	if deliverer != nil {
		undo = append(undo, func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = deliverer.Close(ctx)
		})
	}
	var work *follow.Work
	if store.queue != nil {
		work = &follow.Work{Queue: store.queue, Holder: holder, Lease: cfg.Store.WorkLease}
	}
	core, err := proxy.New(cfg, proxy.Deps{Identity: ident, Engine: engine, Store: store.Store, Logger: log, Events: bus,
		Push: notifier(deliverer), Follow: follow.New(follow.Options{Store: store, Lifecycle: cfg.Lifecycle, Logger: log, Work: work})})
	if err != nil {
		return nil, err
	}
	undo = append(undo, core.Close)
	sources := metrics.Sources{DecisionCache: engine, Policy: engine, TokenCache: ident,
		Store: store, Lifecycle: core}
	if reloader != nil {
		sources.Reloads = reloader
	}
	if deliverer != nil {
		sources.Push = deliverer
	}
	met := metrics.New(cfg.Metrics, sources)
	bus.Subscribe(met)
	dlog, err := decisionlog.New(cfg.DecisionLog)
	if err != nil {
		return nil, fmt.Errorf("decision_log: %w", err)
	}
	undo = append(undo, func() { _ = dlog.Close(context.Background()) })
	bus.Subscribe(dlog)
	sc := &sidecar{cfg: cfg, core: core, sidecar: sidecardoor.New(core, cfg.Limits, log, nil), engine: engine, ident: ident, store: store, log: log, push: deliverer,
		reloader: reloader, dlog: dlog}
	if sc.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	undo = append(undo, func() { sc.ln.Close() })
	if cfg.TLS != nil {
		tc, err := newServerTLS(*cfg.TLS, log)
		if err != nil {
			return nil, err
		}
		sc.ln, sc.tls = tls.NewListener(sc.ln, tc), true
	}
	if sc.adminLn, err = net.Listen("tcp", cfg.Admin); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	undo = append(undo, func() { sc.adminLn.Close() })
	var adminToken string
	if cfg.AdminTokenFile != "" {
		if adminToken, err = admin.LoadToken(cfg.AdminTokenFile); err != nil {
			return nil, err
		}
	}
	sc.srv = sc.sidecar.HTTPServer(sc.ln.Addr().String())
	sc.admin = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: admin.New(admin.Deps{Engine: engine,
		Reloader: reloader, Store: store, StoreReady: store.ping, Ready: core.Ready, Metrics: met.Handler(),
		Pprof: cfg.AdminPprof, Logger: log, Addrs: []string{cfg.Admin, sc.adminLn.Addr().String()},
		Hosts: cfg.AdminHosts, Token: adminToken}),
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if cfg.Envoy.Enabled() {
		if err := sc.startEnvoy(); err != nil {
			return nil, err
		}
	}
	if cfg.Envoy.ExtProcListen != "" {
		if err := sc.startExtProc(); err != nil {
			return nil, err
		}
	}
	// EGRESS WIRING (issue 22): moves into the one assembly (server/) at merge.
	if cfg.Egress.Enabled() {
		if err := sc.startEgress(bus); err != nil {
			return nil, err
		}
		undo = append(undo, sc.stopEgress)
	}
	// --- AuthZEN door (issue 24): minimal wiring until the assembly takes it over.
	if cfg.AuthZEN.Enabled() {
		if err := sc.startAuthZEN(); err != nil {
			return nil, err
		}
		undo = append(undo, func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			sc.authzen.Shutdown(ctx)
		})
	}
	// --- end of the AuthZEN door's wiring.
	go func() { _ = sc.srv.Serve(sc.ln) }()
	go func() { _ = sc.admin.Serve(sc.adminLn) }()
	if cfg.DryRun {
		log.Warn("dry-run is on: every request passes; denials are only logged")
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration: "+w.Msg, "key", w.Key, "line", w.Line)
	}
	warnDevelopmentIdentity(log, ident)
	log.Info("writ is serving", "listen", sc.ln.Addr().String(), "url", sc.URL(), "admin", sc.adminLn.Addr().String(),
		"agents", len(cfg.Agents), "policies", policySource(cfg), "policy_revision", pol.Revision,
		"policy_tests_passed", pol.Tests.Passed, "store", store.desc, "holder", holder, "version", versionString())
	return sc, nil
}

// warnDevelopmentIdentity logs a warning for each way the identity sources
// accept writ's development identity (identity.DevelopmentUses): at start
// and after every reload, for as long as they do.
func warnDevelopmentIdentity(log *slog.Logger, ident *identity.Resolver) {
	for _, u := range ident.DevelopmentUses() {
		log.Warn("identity: accepts writ's development identity; never use it in production: "+u.Msg, "key", u.Key)
	}
}

// newDeliverer builds push delivery from the config (nil when push is left to the
// agents). Every attempt and outcome goes to the events, and is logged with
// the task and context ids and the receiver's host (never the token or the
// full URL). With a work queue, every notification is kept there until its
// outcome, under holder's lease, and what nobody holds is resumed.
func newDeliverer(cfg *config.Config, log *slog.Logger, sink events.Sink, q task.WorkQueue, holder string) *push.Deliverer {
	if cfg.Push.Disabled {
		return nil
	}
	p := cfg.Push
	guard := push.NewGuard(push.GuardConfig{TrustedHosts: p.TrustedHosts})
	return push.NewDeliverer(push.DelivererConfig{Workers: p.Workers, QueueSize: p.QueueSize,
		MaxPerHost: p.MaxInFlightPerHost, MaxPerOwner: p.MaxInFlightPerOwner,
		MaxAttempts: p.MaxAttempts, AttemptTimeout: p.AttemptTimeout,
		Client: guard.Client(p.AttemptTimeout, p.MaxResponseBytes), Logger: log, Events: sink,
		OnAttempt: func(r push.Result) { logDelivery(log, "push delivery attempt", r) },
		OnResult:  func(r push.Result) { logDelivery(log, "push delivery", r) },
		Queue:     q, Holder: holder, Lease: cfg.Store.WorkLease,
	})
}

// notifier is d as the core's Notifier (nil when push is left to the agents).
func notifier(d *push.Deliverer) proxy.Notifier {
	if d == nil {
		return nil
	}
	return d
}

// logDelivery logs one push attempt or outcome with the task and context ids and
// the receiver's host; never the token or the full URL.
func logDelivery(log *slog.Logger, msg string, r push.Result) {
	e := push.Event(r, false)
	attrs := []any{"task_id", e.TaskID, "context_id", e.ContextID, "host", e.Host, "delivered", e.Delivered,
		"attempt", e.Attempt, "status", e.Status, "latency_ms", e.Latency.Milliseconds()}
	if e.Reason != "" {
		attrs = append(attrs, "reason", e.Reason)
	}
	log.Info(msg, attrs...)
}

// URL is the sidecar's base URL.
func (sc *sidecar) URL() string {
	if sc.tls {
		return "https://" + sc.ln.Addr().String()
	}
	return "http://" + sc.ln.Addr().String()
}

// shutdown stops accepting, lets in-flight requests and streams finish up to the
// deadline, then closes what is left.
func (sc *sidecar) shutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if sc.envoy != nil {
		sc.envoy.Shutdown(ctx)
	}
	if sc.extproc != nil {
		sc.extproc.Shutdown(ctx)
	}
	if sc.egress != nil { // EGRESS WIRING (issue 22)
		sc.egress.Shutdown(ctx)
		sc.exch.Close()
	}
	if sc.authzen != nil {
		sc.authzen.Shutdown(ctx)
	}
	_ = sc.srv.Shutdown(ctx)
	_ = sc.admin.Shutdown(ctx)
	sc.core.Close()
	if sc.push != nil {
		// What is queued gets its chance to be delivered before the deadline.
		_ = sc.push.Close(ctx)
	}
	_ = sc.dlog.Close(ctx) // after the push queue: its last outcomes are logged too
	// Last: the push queue and the followers record their ends in it.
	if err := sc.store.Close(); err != nil {
		sc.log.Error("closing the lifecycle store", "error", err)
	}
	sc.ident.Close()
}

// startEnvoy opens the ext_authz listeners (Envoy mode) over the sidecar's
// proxy, so both make the same decisions from one lifecycle store.
func (sc *sidecar) startEnvoy() error {
	ext, err := extauthz.New(sc.core, sc.ident, sc.cfg, sc.log)
	if err != nil {
		return err
	}
	if err := ext.Listen(); err != nil {
		return err
	}
	sc.envoy = ext
	if sc.cfg.Envoy.DryRun {
		sc.log.Warn("envoy.dry_run is on: every ext_authz check is answered OK; refusals are only logged")
	}
	sc.log.Info("Envoy mode: ext_authz is serving", "grpc", ext.GRPCAddr(), "http", ext.HTTPAddr(),
		"max_request_bytes", sc.cfg.Envoy.BodyLimit(sc.cfg.Limits), "parse_body", sc.cfg.Envoy.ParsesBody(),
		"require_route_name", sc.cfg.Envoy.RequiresRouteName())
	sc.warnRouteName()
	return nil
}

// startExtProc opens the ext_proc listener (Envoy mode, requests and answers)
// over the sidecar's proxy: one lifecycle store and push deliverer for both.
func (sc *sidecar) startExtProc() error {
	ext, err := extproc.New(sc.core, sc.ident, sc.cfg, sc.log)
	if err != nil {
		return err
	}
	if err := ext.Listen(); err != nil {
		return err
	}
	sc.extproc = ext
	sc.log.Info("Envoy mode: ext_proc is serving", "addr", ext.Addr(),
		"max_request_bytes", sc.cfg.Envoy.BodyLimit(sc.cfg.Limits), "max_response_bytes", sc.cfg.Envoy.ResponseLimit(),
		"require_route_name", sc.cfg.Envoy.RequiresRouteName())
	sc.warnRouteName()
	return nil
}

// startEgress opens the egress listener for the local agent's own calls
// (egress.*), with the token exchanger its calls' outbound tokens come from.
// EGRESS WIRING (issue 22): moves into the one assembly (server/) at merge.
func (sc *sidecar) startEgress(bus *events.Bus) error {
	exch, err := exchange.New(sc.cfg.Egress.Exchange, exchange.WithEvents(bus))
	if err != nil {
		return err
	}
	door, err := egressdoor.New(sc.core, exch, sc.cfg, sc.log)
	if err == nil {
		err = door.Listen()
	}
	if err != nil {
		exch.Close()
		return err
	}
	sc.egress, sc.exch = door, exch
	e := sc.cfg.Egress
	sc.log.Info("egress is serving", "addr", door.Addr(), "agent", e.Agent, "targets", len(e.Targets),
		"sts", e.Exchange.Issuer, "link_ttl", e.LinkTTL.String())
	return nil
}

// stopEgress closes the egress door at once (a start that failed later).
func (sc *sidecar) stopEgress() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sc.egress.Shutdown(ctx)
	sc.exch.Close()
}

// startAuthZEN opens the AuthZEN listener (authzen.listen) over the
// sidecar's core and engine: delegation questions are decided by the core
// as the sidecar decides requests, and the applications' packages by the
// engine's prepared rules. (Issue 24's minimal wiring; the assembly takes
// it over.)
func (sc *sidecar) startAuthZEN() error {
	var tc *tls.Config
	if t := sc.cfg.AuthZEN.TLS; t != nil {
		var err error
		if tc, err = newServerTLS(*t, sc.log); err != nil {
			return fmt.Errorf("authzen.tls: %w", err)
		}
	}
	pdp, err := authzen.New(sc.core, engineRules(sc.engine), sc.ident, sc.cfg, authzen.Options{TLS: tc, Logger: sc.log})
	if err != nil {
		return err
	}
	if err := pdp.Listen(); err != nil {
		return err
	}
	sc.authzen = pdp
	var apps []string
	for _, a := range sc.cfg.AuthZEN.Applications {
		apps = append(apps, a.Name+"="+a.PackageRef())
	}
	sc.log.Info("AuthZEN: the policy decision point is serving", "addr", pdp.Addr(), "tls", tc != nil,
		"delegation_profile", !sc.cfg.AuthZEN.Delegation.Disabled, "applications", apps, "clients", sc.cfg.AuthZEN.Clients)
	return nil
}

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

// warnRouteName warns, once, that Envoy requests may go unnamed.
func (sc *sidecar) warnRouteName() {
	if !sc.cfg.Envoy.RequiresRouteName() && !sc.warnedRouteName {
		sc.warnedRouteName = true
		sc.log.Warn("envoy.require_route_name is off: a request whose Envoy route names no agent is routed by writ itself (canonical targets only)")
	}
}

// serveCmd runs `writ serve`. Everything it writes on stderr is writ's JSON
// log, configuration problems included.
func serveCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", "writ serve [-config writ.yaml] [-listen ADDR] [-admin ADDR] [-upstream URL] [-policies DIR] [-log-level LEVEL]",
		"Runs the sidecar (and Envoy mode when configured) in front of the configured agents.")
	path := fs.String("config", "writ.yaml", "the configuration file")
	listen := fs.String("listen", "", "the sidecar's address (overrides listen)")
	admin := fs.String("admin", "", "the admin listener's address (overrides admin)")
	upstream := fs.String("upstream", "", "the first agent's upstream URL (overrides agents[0].upstream: a sidecar has one)")
	policies := fs.String("policies", "", "a policy directory (overrides policies; default: the shipped policies embedded in writ)")
	level := fs.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	lv := new(slog.LevelVar)
	lv.Set(parseLevel(*level))
	log := newLogger(stderr, lv)
	installLogger(log, stderr)
	cfg, err := config.Load(*path)
	if err != nil {
		logProblems(log, *path, err)
		return 1
	}
	if *level == "" {
		lv.Set(parseLevel(cfg.Log.Level))
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *admin != "" {
		cfg.Admin = *admin
	}
	if *upstream != "" && len(cfg.Agents) > 0 {
		cfg.Agents[0].Upstream = *upstream
	}
	if *policies != "" {
		cfg.Policies = []string{*policies}
	}
	if cfg.Store.Kind == "" {
		// The default of `writ serve`: nothing lost on kill -9. Memory is an
		// explicit choice (store.kind: memory).
		cfg.Store.Kind = config.StoreFile
	}
	if err := cfg.Validate(); err != nil {
		logProblems(log, *path, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	sc, err := startSidecar(ctx, cfg, log)
	if err != nil {
		log.Error("refusing to start", "error", err.Error())
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if sc.reloader != nil {
		go sc.reloader.OnSignal(ctx, hup)
		go func() {
			if err := sc.reloader.Watch(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("policy watch stopped; SIGHUP still reloads", "error", err)
			}
		}()
	} else {
		go func() {
			for range hup {
				log.Info("SIGHUP: nothing to reload: the policies are the ones embedded in writ (set policies: to load files)")
				warnDevelopmentIdentity(log, sc.ident)
			}
		}()
	}
	<-ctx.Done()
	log.Info("shutting down: draining in-flight requests", "deadline", "30s")
	sc.shutdown(30 * time.Second)
	return 0
}

// logProblems logs a configuration that cannot be served: one line per
// problem, with its file, line and key.
func logProblems(log *slog.Logger, path string, err error) {
	var ps *config.Problems
	if !errors.As(err, &ps) {
		log.Error("invalid configuration", "config", path, "error", err.Error())
		return
	}
	for _, p := range ps.List {
		log.Error("invalid configuration: "+p.Msg, "config", path, "line", p.Line, "key", p.Key)
	}
}
