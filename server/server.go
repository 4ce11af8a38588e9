// Package server is writ's one assembly: a validated configuration in, a
// running writ out. `writ serve`, `writ demo`, the tests' harnesses and the
// benchmarks all build writ through New; nothing else wires the core to its
// doors.
//
// New starts the parts in the order each needs the ones before it:
//
//	identity sources → policy (compiled, tested, its reloader) → decision engine
//	→ event bus → lifecycle store (+ work queue) → decision log → push delivery
//	→ admission core (+ task follower) → metrics → admin API → front doors
//
// and Shutdown stops them in the reverse order, so that each part is still
// there for what the parts above it do while they stop: the doors drain
// their requests (all at once) while the core, push, the decision log and
// the store still work; push delivers what is queued while the decision log
// still records its outcomes; the store closes last but for identity, once
// push and the followers have recorded their ends in it. A start that fails
// part-way stops what it had started, in the same order.
//
// Every error of a part starting, serving or stopping is returned (New's,
// Shutdown's, joined), logged, and counted in writ_component_errors_total:
// a listener that stopped serving, a decision log that could not be flushed
// (audit lines lost), a store that did not close cleanly.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/fleet"
	"github.com/writ-authz/writ/metrics"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/follow"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/tracing"
)

// Server is a running writ. Its methods are safe for concurrent use.
type Server struct {
	cfg  *config.Config
	log  *slog.Logger
	opts options

	ident    *identity.Resolver
	policy   *authz.Policy // the policy loaded at start
	engine   *authz.Engine
	reloader *authz.Reloader // nil with the policies embedded in writ
	// bundle and shadowBundle feed the live and the shadow set from a
	// bundle service (nil without policy_bundle: / policy_bundle_shadow:).
	bundle, shadowBundle *bundleFeed
	// The shadow policy set (policies_shadow:), all nil without one.
	shadowEngine   *authz.Engine
	shadowReloader *authz.Reloader
	shadow         *authz.Shadow
	bus            *events.Bus
	store          *lifecycleStore
	holder         string
	dlog           *decisionlog.Log
	fleet          *fleet.Plugins  // the status document, and decision_log.upload's shipping
	activations    activations     // when each policy set's revision began serving
	parts          *partsReport    // the status document's view of writ's parts
	push           *push.Deliverer // nil when push is left to the agents or Options gave a notifier
	core           *proxy.Core
	// tracing is the tracer provider (tracing.Off when tracing: is absent).
	tracing *tracing.Provider
	metrics *metrics.Metrics
	admin   *httpListener
	doors   []Door // in opening order
	// listener is WithListener's, until the sidecar takes it.
	listener net.Listener

	// stops are what Shutdown (or a failed start) stops, in start order.
	stops []stop
	// stopWatch ends the policy file watch; watched is closed once it has.
	stopWatch context.CancelFunc
	watched   chan struct{}

	errs componentErrors
	// served are the errors parts met while running (a listener that
	// stopped serving), already logged and counted; Shutdown returns them.
	servedMu sync.Mutex
	served   []error

	shutdownOnce sync.Once
	shutdownErr  error
}

// stop is one part's way of stopping, under its component name. Stops
// started one after the other with together set stop at the same time (the
// doors: all stop accepting at once).
type stop struct {
	component string
	stop      func(ctx context.Context) error
	together  bool
}

// Options adjust what New builds; the zero set builds what the
// configuration says, as `writ serve` runs it.
type options struct {
	log             *slog.Logger
	transport       http.RoundTripper
	store           task.Store
	sinks           []events.Sink
	notifier        proxy.Notifier
	listener        net.Listener
	skipPolicyTests bool
	version         string
}

// Option adjusts what New builds (what tests and embedders inject).
type Option func(*options)

// WithLogger is writ's log (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithTransport carries writ's own upstream requests: the forwarded ones,
// card fetches, readiness probes and task following (default: one tuned
// transport for the core's requests and one for the sidecar's).
func WithTransport(t http.RoundTripper) Option { return func(o *options) { o.transport = t } }

// WithStore is the lifecycle store instead of the one store: configures.
// The server neither opens nor closes it; it is also the work queue when it
// implements task.WorkQueue, and readiness asks its Ping(ctx) error method
// when it has one.
func WithStore(s task.Store) Option { return func(o *options) { o.store = s } }

// WithEvents subscribes sinks to every event (decisions, requests,
// lifecycle, push), beside the metrics and the decision log.
func WithEvents(sinks ...events.Sink) Option {
	return func(o *options) { o.sinks = append(o.sinks, sinks...) }
}

// WithNotifier delivers push notifications through n instead of the
// deliverer the push: section configures (which is then not built, and
// push.disabled is not read); the server does not close n. n must not be
// nil: set push.disabled to leave push to the agents.
func WithNotifier(n proxy.Notifier) Option { return func(o *options) { o.notifier = n } }

// WithListener is the sidecar's listener, opened by the caller (who needs
// its address before the configuration is final, e.g. for an agent's
// public_url); listen: is then not read, tls: still applies. The server
// closes it.
func WithListener(ln net.Listener) Option { return func(o *options) { o.listener = ln } }

// WithoutPolicyTests skips the policy set's own Rego tests at load and
// reload (the known requests are still decided): for harnesses that start
// many writs from policies tested elsewhere. Never for serving.
func WithoutPolicyTests() Option { return func(o *options) { o.skipPolicyTests = true } }

// WithVersion is the version the start line logs.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// ErrNoReload is what Reload returns when the policies cannot change while
// writ runs: they are the ones embedded in writ (policies: is not set).
var ErrNoReload = errors.New("nothing to reload: the policies are the ones embedded in writ")

// New builds everything cfg (validated) describes and starts serving. A
// policy set that does not compile or fails its own tests refuses the start.
// What had started when a part fails is stopped again, and the error says
// what failed (joined with any error of stopping).
func New(ctx context.Context, cfg *config.Config, opts ...Option) (_ *Server, err error) {
	s := &Server{cfg: cfg, errs: newComponentErrors()}
	for _, o := range opts {
		o(&s.opts)
	}
	s.log = s.opts.log
	if s.log == nil {
		s.log = slog.Default()
	}
	s.listener = s.opts.listener
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = errors.Join(err, s.stopAll(ctx))
			if s.listener != nil { // given, and never served: still ours to close
				err = errors.Join(err, s.listener.Close())
			}
		}
	}()
	for _, start := range []func(context.Context) error{
		s.startTracing, s.startIdentity, s.startPolicy, s.startStore, s.startDecisionLog, s.startPush,
		s.startCore, s.startMetrics, s.startAdmin, s.startDoors,
	} {
		if err := start(ctx); err != nil {
			return nil, err
		}
	}
	s.startWatch()
	s.startParts()
	s.logStart()
	return s, nil
}

// started records how a part that has started is stopped.
func (s *Server) started(component string, f func(ctx context.Context) error) {
	s.stops = append(s.stops, stop{component: component, stop: f})
}

// startTracing builds the tracer provider first, so that it stops last:
// the spans of everything the other parts do while they stop are exported
// (flushed) before writ exits.
func (s *Server) startTracing(context.Context) error {
	p, err := tracing.New(s.cfg.Tracing, s.log, func() { s.errs.inc(componentTracing) })
	if err != nil {
		return err
	}
	s.tracing = p
	if p.On() {
		s.errs.add(componentTracing)
		s.started(componentTracing, p.Shutdown)
	}
	return nil
}

// tracer is the tracer the core and push take: nil when tracing is off, so
// that they do no tracing work at all.
func (s *Server) tracer() trace.Tracer {
	if !s.tracing.On() {
		return nil
	}
	return s.tracing.Tracer()
}

func (s *Server) startIdentity(context.Context) error {
	ident, err := identity.New(s.cfg.Identity)
	if err != nil {
		return err
	}
	s.ident = ident
	s.errs.add(componentIdentity)
	s.started(componentIdentity, func(context.Context) error { ident.Close(); return nil })
	return nil
}

func (s *Server) startPolicy(ctx context.Context) error {
	opt, err := policyOptions(s.cfg)
	if err != nil {
		return err
	}
	opt.SkipTests = s.opts.skipPolicyTests
	if s.cfg.PolicyBundle != nil {
		if s.bundle, s.policy, err = s.firstBundle(ctx, "policy_bundle", s.cfg.PolicyBundle, opt); err != nil {
			return err
		}
	} else if s.policy, err = loadPolicy(ctx, s.cfg, opt); err != nil {
		return err
	}
	if s.engine, err = authz.NewEngine(s.policy, authz.Options{CacheSize: s.cfg.DecisionCacheSize, DryRun: s.cfg.DryRun, Logger: s.log}); err != nil {
		return err
	}
	// The embedded policies cannot change while writ runs: no reloader
	// (the admin API answers a reload request 503, and Reload says why).
	switch {
	case s.bundle != nil:
		s.reloader = authz.NewSourceReloader(s.engine, s.bundle.src.load, opt, s.log)
		s.bundle.reloader = s.reloader
		s.reloader.After = func(r authz.ReloadResult) { s.warnDevelopmentIdentity(); s.activations.reloaded("writ", r) }
		s.errs.add(componentPolicyBundle)
	case !s.cfg.EmbeddedPolicies():
		s.reloader = authz.NewReloader(s.engine, s.cfg.Policies, opt, s.log)
		// Every reload is a moment an operator reads the log: say it again.
		s.reloader.After = func(r authz.ReloadResult) { s.warnDevelopmentIdentity(); s.activations.reloaded("writ", r) }
		s.errs.add(componentPolicyWatch)
	}
	return s.startShadowPolicy(ctx, opt)
}

func (s *Server) startStore(context.Context) error {
	// Producers emit to the bus from the start; the observers subscribe to
	// it as they are built.
	s.bus = &events.Bus{}
	for _, sink := range s.opts.sinks {
		s.bus.Subscribe(sink)
	}
	if s.opts.store != nil {
		s.store = givenStore(s.opts.store)
	} else {
		st, err := openStore(s.cfg, s.log, s.bus)
		if err != nil {
			return err
		}
		s.store = st
	}
	s.errs.add(componentStore)
	s.started(componentStore, func(context.Context) error { return s.store.Close() })
	// One holder per process names its leases on pending deliveries and
	// followed tasks; what another process left unfinished is claimed.
	s.holder = newHolder()
	return nil
}

func (s *Server) startDecisionLog(context.Context) error {
	dlog, err := decisionlog.New(s.cfg.DecisionLog)
	if err != nil {
		return fmt.Errorf("decision_log: %w", err)
	}
	s.dlog = dlog
	s.bus.Subscribe(dlog)
	s.errs.add(componentDecisionLog)
	// After push (stopped before it): the last push outcomes are logged too.
	s.started(componentDecisionLog, closeDecisionLog(dlog))
	return s.startFleet(context.Background())
}

// decisionInputs is how decisions carry their policy input to the decision
// log: nil (they carry none) unless decision_log.include_input is on and
// the log is written somewhere.
func decisionInputs(cfg config.DecisionLog) (*authz.InputLog, error) {
	if !cfg.IncludeInput || cfg.Output == "off" {
		return nil, nil
	}
	l, err := authz.NewInputLog(cfg.Mask)
	if err != nil {
		return nil, fmt.Errorf("decision_log.mask: %w", err)
	}
	return l, nil
}

// closeDecisionLog closes the decision log and says whether audit lines
// were lost since the start: a Close that could not write what the log held
// (its deadline passed, the file did not close), or lines dropped or lost to
// failed writes on the way. Each loss was logged when it happened; none may
// end a run that looks clean.
func closeDecisionLog(dlog *decisionlog.Log) func(context.Context) error {
	return func(ctx context.Context) error {
		err := dlog.Close(ctx)
		if st := dlog.Stats(); st.Dropped+st.Errors > 0 {
			err = errors.Join(err, fmt.Errorf("%d audit lines lost since the start (%d dropped, %d to failed writes)",
				st.Dropped+st.Errors, st.Dropped, st.Errors))
		}
		return err
	}
}

func (s *Server) startPush(context.Context) error {
	if s.opts.notifier != nil {
		return nil
	}
	s.push = newDeliverer(s.cfg, s.log, s.bus, s.store.queue, s.holder, s.tracer())
	if s.push == nil {
		return nil
	}
	s.errs.add(componentPush)
	// What is queued gets its chance to be delivered before the deadline.
	s.started(componentPush, s.push.Close)
	return nil
}

func (s *Server) startCore(context.Context) error {
	var work *follow.Work
	if s.store.queue != nil {
		work = &follow.Work{Queue: s.store.queue, Holder: s.holder, Lease: s.cfg.Store.WorkLease}
	}
	inputs, err := decisionInputs(s.cfg.DecisionLog)
	if err != nil {
		return err
	}
	s.startShadow()
	// The store's calls are spans of the requests (and followed tasks) that
	// make them; the metrics and the admin API read it untraced.
	st := s.tracing.Store(s.store, s.cfg.Store.Kind)
	core, err := proxy.New(s.cfg, proxy.Deps{Identity: s.ident, Engine: s.decider(), Store: st, Logger: s.log,
		Transport: s.opts.transport, Events: s.bus, Push: s.notifier(), Inputs: inputs, Tracer: s.tracer(),
		Follow: follow.New(follow.Options{Store: st, Lifecycle: s.cfg.Lifecycle, Logger: s.log, Work: work})})
	if err != nil {
		return err
	}
	s.core = core
	s.started("core", func(context.Context) error { core.Close(); return nil })
	return nil
}

// notifier is what delivers push notifications: the one Options gave, the
// deliverer, or none (push left to the agents).
func (s *Server) notifier() proxy.Notifier {
	switch {
	case s.opts.notifier != nil:
		return s.opts.notifier
	case s.push != nil:
		return s.push
	}
	return nil
}

func (s *Server) startMetrics(context.Context) error {
	src := metrics.Sources{DecisionCache: s.engine, Policy: s.engine, TokenCache: s.ident,
		Store: s.store, Lifecycle: s.core, Components: &s.errs}
	if s.reloader != nil {
		src.Reloads = s.reloader
	}
	if s.shadow != nil {
		src.Shadow = s.shadow
	}
	if s.push != nil {
		src.Push = s.push
	}
	if s.fleet.Uploading() {
		src.Upload = s.fleet
	}
	s.metrics = metrics.New(s.cfg.Metrics, src)
	s.bus.Subscribe(s.metrics)
	return nil
}

// startWatch reloads the policy whenever one of its files changes, until
// Shutdown.
func (s *Server) startWatch() {
	rls := s.reloaders()
	for _, f := range []*bundleFeed{s.bundle, s.shadowBundle} {
		if f == nil {
			continue
		}
		// OPA's downloader polls (or long-polls) a bundle set until
		// Shutdown stops it: only a set of files is watched.
		f.start()
		rls = slices.DeleteFunc(rls, func(r *authz.Reloader) bool { return r == f.reloader })
	}
	if len(rls) == 0 {
		return
	}
	s.errs.add(componentPolicyWatch)
	ctx, cancel := context.WithCancel(context.Background())
	s.stopWatch, s.watched = cancel, make(chan struct{})
	var wg sync.WaitGroup
	for _, rl := range rls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rl.Watch(ctx); err != nil && !errors.Is(err, context.Canceled) {
				s.errs.inc(componentPolicyWatch)
				s.log.Warn("policy watch stopped; SIGHUP still reloads", "error", err)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(s.watched)
	}()
}

// logStart logs what writ serves with, and every warning of the
// configuration, once everything listens.
func (s *Server) logStart() {
	if s.cfg.DryRun {
		s.log.Warn("dry-run is on: every request passes; denials are only logged")
	}
	for _, w := range s.cfg.Warnings() {
		s.log.Warn("configuration: "+w.Msg, "key", w.Key, "line", w.Line)
	}
	s.warnDevelopmentIdentity()
	s.log.Info("writ is serving", "listen", s.Addr(), "url", s.URL(), "admin", s.AdminAddr(),
		"agents", len(s.cfg.Agents), "policies", policySource(s.cfg), "policy_revision", s.policy.Revision,
		"policy_tests_passed", s.policy.Tests.Passed, "shadow_policies", shadowSource(s.cfg),
		"shadow_revision", s.shadowRevision(), "store", s.store.desc, "holder", s.holder, "version", s.opts.version)
}

// warnDevelopmentIdentity logs a warning for each way the identity sources
// accept writ's development identity (identity.DevelopmentUses): at start
// and after every reload, for as long as they do.
func (s *Server) warnDevelopmentIdentity() {
	for _, u := range s.ident.DevelopmentUses() {
		s.log.Warn("identity: accepts writ's development identity; never use it in production: "+u.Msg, "key", u.Key)
	}
}

// Reloadable reports whether the policy can be reloaded (it is read from
// files, not embedded in writ).
func (s *Server) Reloadable() bool { return s.reloader != nil || s.shadowReloader != nil }

// Reload loads the policy files anew and swaps them in when they compile
// and pass their tests; otherwise the last good policy keeps serving and
// the error says why. With the policies embedded in writ it returns
// ErrNoReload (and says again whether writ accepts its development
// identity: an operator reads the log now).
//
// With a shadow set (policies_shadow:) it reloads that too, through the same
// gate: a refused shadow keeps its last good revision, and the error says so.
func (s *Server) Reload(ctx context.Context) error {
	if s.reloader == nil && s.shadowReloader == nil {
		s.warnDevelopmentIdentity()
		return ErrNoReload
	}
	return policyReloads{live: s.reloader, shadow: s.shadowReloader}.Reload(ctx)
}

// shadowRevision is the shadow set's revision; "" without one.
func (s *Server) shadowRevision() string {
	if s.shadowEngine == nil {
		return ""
	}
	return s.shadowEngine.Revision()
}

// Core is the admission core, for tests and embedders that drive it
// directly.
func (s *Server) Core() *proxy.Core { return s.core }

// Engine is the decision engine, for tests and embedders that evaluate the
// serving policy directly.
func (s *Server) Engine() *authz.Engine { return s.engine }

// Addr is the sidecar's listener address, as bound.
func (s *Server) Addr() string { return s.ListenerAddr("listen") }

// URL is the sidecar's base URL (https when tls: is set).
func (s *Server) URL() string {
	if s.cfg.TLS != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// AdminAddr is the admin listener's address, as bound.
func (s *Server) AdminAddr() string { return s.admin.ln.Addr().String() }

// AdminURL is the admin API's base URL.
func (s *Server) AdminURL() string { return "http://" + s.AdminAddr() }

// ListenerAddr is the address, as bound, of the listener the configuration
// key names ("listen", "admin", "envoy.grpc_listen", "envoy.http_listen",
// "envoy.ext_proc_listen", "egress.listen", "authzen.listen"); "" when writ
// has no such listener.
func (s *Server) ListenerAddr(key string) string {
	if key == "admin" {
		return s.AdminAddr()
	}
	for _, d := range s.doors {
		if a, ok := d.Addrs()[key]; ok {
			return a
		}
	}
	return ""
}

// servingFailed reports a listener that stopped serving while writ runs:
// logged and counted at once, and returned by Shutdown.
func (s *Server) servingFailed(component string, err error) {
	s.errs.inc(component)
	s.log.Error("a listener stopped serving", "component", component, "error", err)
	s.servedMu.Lock()
	s.served = append(s.served, err)
	s.servedMu.Unlock()
}

// Shutdown stops writ: the doors stop accepting and drain their requests
// and streams until ctx ends (then what is left is cut), and every other
// part stops in the reverse order of its start (push delivers what is
// queued, the decision log writes what it holds, the store closes). It
// returns every error met serving and stopping, joined; each is also logged
// and counted. Calls after the first return the first one's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		if s.stopWatch != nil {
			s.stopWatch()
			<-s.watched
		}
		ferr := errors.Join(s.bundle.stop(ctx), s.shadowBundle.stop(ctx))
		err := errors.Join(ferr, s.stopAll(ctx))
		s.servedMu.Lock()
		s.shutdownErr = errors.Join(append(s.served, err)...)
		s.servedMu.Unlock()
	})
	return s.shutdownErr
}

// stopAll stops what has started, last started first (a run of stops
// marked together at the same time). Each error is logged, counted under
// its component and returned, joined.
func (s *Server) stopAll(ctx context.Context) error {
	var errs []error
	for i := len(s.stops) - 1; i >= 0; {
		j := i
		for j > 0 && s.stops[i].together && s.stops[j-1].together {
			j--
		}
		run := s.stops[j : i+1]
		results := make([]error, len(run))
		var wg sync.WaitGroup
		for k := range run {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[k] = run[k].stop(ctx)
			}()
		}
		wg.Wait()
		for k := len(run) - 1; k >= 0; k-- {
			if results[k] != nil {
				errs = append(errs, s.stopFailed(run[k].component, results[k]))
			}
		}
		i = j - 1
	}
	s.stops = nil
	return errors.Join(errs...)
}

// stopFailed logs and counts a part that did not stop cleanly, and returns
// err naming it.
func (s *Server) stopFailed(component string, err error) error {
	s.errs.inc(component)
	switch component {
	case componentDecisionLog:
		s.log.Error("the decision log could not write what it held and close: audit lines may be lost", "error", err)
	case componentStore:
		s.log.Error("closing the lifecycle store", "error", err)
	default:
		s.log.Error("shutdown: "+component+" did not stop cleanly", "component", component, "error", err)
	}
	return fmt.Errorf("%s: %w", component, err)
}

// The components that count their errors, besides the doors (named by
// their Name).
const (
	componentIdentity    = "identity"
	componentPolicyWatch = "policy_watch"
	// componentPolicyBundle counts a bundle that passed but could not be
	// persisted in policy_bundle.persist_dir.
	componentPolicyBundle = "policy_bundle"
	// componentFleet is OPA's plugins writ runs: the status document and
	// decision_log.upload's shipping to the collector.
	componentFleet       = "fleet"
	componentStore       = "store"
	componentDecisionLog = "decision_log"
	componentPush        = "push"
	componentAdmin       = "admin"
	// componentTracing counts the span exports that failed (the collector
	// down or refusing), and a flush at shutdown that did not finish.
	componentTracing = "tracing"
)

// componentErrors counts the errors of each component writ runs; it is the
// metrics' Components source.
type componentErrors struct {
	mu    sync.Mutex
	order []string
	n     map[string]uint64
}

func newComponentErrors() componentErrors { return componentErrors{n: map[string]uint64{}} }

// add registers a component (its count starts at zero, so rates and alerts
// see it).
func (c *componentErrors) add(component string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.n[component]; !ok {
		c.order = append(c.order, component)
		c.n[component] = 0
	}
}

// inc counts one error of component.
func (c *componentErrors) inc(component string) {
	c.add(component)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[component]++
}

// ComponentErrors implements the metrics' Components source: f once per
// component, in the order they started.
func (c *componentErrors) ComponentErrors(f func(component string, n uint64)) {
	c.mu.Lock()
	counts := make([]uint64, len(c.order))
	order := append([]string(nil), c.order...)
	for i, name := range order {
		counts[i] = c.n[name]
	}
	c.mu.Unlock()
	for i, name := range order {
		f(name, counts[i])
	}
}

// ComponentErrors calls f with the number of errors each component of writ
// met starting, serving and stopping (writ_component_errors_total).
func (s *Server) ComponentErrors(f func(component string, n uint64)) { s.errs.ComponentErrors(f) }
