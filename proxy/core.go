// Package proxy is writ's admission core: the one place a request is
// decided, whatever front door it came through.
//
// Every request is one call of Core.Admit: canonical target → route →
// limits (framing, body) → adapter parse → identity → lifecycle record →
// policy decision (with its cache) → lifecycle law, with one decision event.
// Admit returns an Outcome — not found, refuse, serve (writ's own answer,
// rendered: a card, the directory, a push-config operation) or forward (a
// Plan) — and each front door is a thin mapping of it, in a package of its
// own that uses only this package's exported API: the reverse-proxy sidecar
// (proxy/sidecar), Envoy's ext_authz (proxy/extauthz, which sees no answers)
// and ext_proc (proxy/extproc). No door imports another, and this package
// imports none.
//
// A Plan is also the one executor of a Forward: Plan.Forward sends the
// request and relays the answer for a door that sends it itself; a door
// whose platform sends it feeds the answer through Plan.Reads, Answer,
// Stream or Chunks. Either way the agent's answers are recorded in the
// lifecycle store, push callbacks notified, and tasks that outlive their
// request handed to the Follower (proxy/follow).
//
// The lifecycle law (lifecycle.go: no message to, no cancel of, a task in a
// terminal state) runs in Admit after the decision, for every door alike, so
// a caller who may not see a task learns nothing of its state.
package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// Deps are the parts a Core is built from. Identity, Engine and Store are
// required; the others have defaults.
type Deps struct {
	// Identity names the caller of each request (identity.Resolver).
	Identity Identifier
	// Engine decides each request (authz.Engine).
	Engine Decider
	// Store keeps the lifecycle records.
	Store  task.Store
	Logger *slog.Logger
	// Transport carries writ's own upstream requests: card fetches, readiness
	// probes and task following (default: a tuned http.Transport).
	Transport http.RoundTripper
	// Events receives decisions, requests and lifecycle events (metrics, the
	// decision log); nil observes nothing.
	Events events.Sink
	// Push delivers push notifications. With it, writ keeps push configs itself
	// (stripped from what the agent receives), answers the push-config
	// operations, and advertises push in the cards it serves; nil leaves push
	// to the agents.
	Push Notifier
	// Follow builds the follower of the tasks that outlive their request
	// (follow.New makes one), which the core starts with itself and closes
	// with itself; nil follows none (push notifications then come only from
	// the answers callers read).
	Follow func(*Core) Follower
	// Inputs, when set, puts each decision's policy input on its event
	// (decision_log.include_input), recorded as it says; nil: events carry
	// no input.
	Inputs *authz.InputLog
	// Tracer, when set, traces every request (trace.go): the caller's W3C
	// trace context is read, spans are made for the admission, its
	// identification and decision, the forward, and the agent gets the
	// forward's trace context. nil (tracing off) does none of it.
	Tracer trace.Tracer
}

// Identifier is what the core needs of identity: the caller a request's
// credentials name. identity.Resolver is the one writ runs. It is called on
// every request that a door has not identified already: it must be safe for
// concurrent use and fast (verified tokens cached), and it refuses what it
// cannot verify with an error (the caller is then anonymous).
type Identifier interface {
	Identify(ctx context.Context, c identity.Credentials) (identity.Caller, error)
}

// Decider is what the core needs of the decision point: a decision on one
// policy input, and the scopes the serving policy requires for an operation
// (what an egress call asks the STS for). authz.Engine is the one writ runs.
// Decide is called on every admitted request, RequiredScopes on every egress
// call: both must be safe for concurrent use and fast (RequiredScopes reads
// what the policy said once per revision). Decide must not modify the
// input; it may read it after it returns (a shadow policy set decides it
// again later, off the request's path): the core never modifies an input
// once built. An error denies (fail closed).
type Decider interface {
	Decide(ctx context.Context, in *authz.Input) (authz.Decision, error)
	RequiredScopes(op string) []string
}

var (
	_ Identifier   = (*identity.Resolver)(nil)
	_ Decider      = (*authz.Engine)(nil)
	_ events.Input = authz.LoggedInput{}
)

// Notifier takes rendered notifications for delivery; push.Deliverer is the one
// writ runs. Enqueue must not wait for delivery (it may write to the store).
type Notifier interface {
	Enqueue(n push.Notification) error
}

var _ Notifier = (*push.Deliverer)(nil)

// Core is the admission core: the one place a decision is made. It is safe for
// concurrent use.
type Core struct {
	cfg    *config.Config
	routes []*route // longest route first
	byName map[string]*route
	// byHost: some agent lists hosts, so the request's host routes.
	byHost bool
	ident  Identifier
	engine Decider
	store  task.Store
	client *http.Client
	log    *slog.Logger
	lim    wire.Limits
	// schemes are the security schemes writ itself accepts, for published cards.
	schemes []task.SecurityScheme
	events  events.Sink
	// inputs records each decision's input on its event (nil: none).
	inputs   *authz.InputLog
	notifier Notifier
	// follower follows the tasks that outlive their request (nil: none).
	follower Follower
	stats    Stats
	// cardKey signs every card writ serves; jku fetches the key sets that
	// agents' card signatures name, through the card-fetch SSRF guard.
	cardKey *cardKey
	jku     *http.Client
	// egress is egress mode (egress.go); nil when it is off.
	egress *egressSide
	// tracer makes the request's spans (trace.go); nil when tracing is off.
	tracer trace.Tracer
}

// Stats counts what the core did, for tests. StoreErrors are the lifecycle
// store's faults; Cancelled the store operations a caller's cancellation cut
// short (storeFault), which are none.
type Stats struct {
	Requests, Denied, Violations, StoreErrors, Cancelled atomic.Uint64
}

// route is one protected agent.
type route struct {
	agent    *config.Agent
	target   *authz.Target
	prefix   string // route without trailing slash ("" for "/")
	upstream *url.URL
	edges    adapters.Route
	cards    *cardCache
	// signer signs the cards served for the route (its jku names writ's key
	// set at the route's public origin); cardKeys, when set, are the only
	// keys the agent's own card may be signed with (agents[].card_keys).
	signer   wire.Signer
	cardKeys *jose.JSONWebKeySet
	// egress is set on an egress target's route (egress.targets[]).
	egress *config.EgressTarget
}

// New builds the core from a validated config.
func New(cfg *config.Config, d Deps) (*Core, error) {
	if d.Identity == nil || d.Engine == nil || d.Store == nil {
		return nil, fmt.Errorf("proxy: identity, engine and store are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Transport == nil {
		d.Transport = NewTransport(cfg.Limits.UpstreamTimeout)
	}
	if d.Events == nil {
		d.Events = events.Nop{}
	}
	c := &Core{cfg: cfg, ident: d.Identity, engine: d.Engine, store: d.Store, log: d.Logger,
		client: NewClient(d.Transport),
		lim:    wire.Limits{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxJSONDepth: cfg.Limits.MaxJSONDepth},
		byName: map[string]*route{}, schemes: acceptedSchemes(cfg), notifier: d.Push, events: d.Events, inputs: d.Inputs, tracer: d.Tracer}
	var err error
	if c.cardKey, err = loadCardKey(cfg.Cards.SigningKeyFile); err != nil {
		return nil, err
	}
	c.jku = push.NewGuard(push.GuardConfig{TrustedHosts: cfg.Cards.JKUTrustedHosts, DialTimeout: cfg.Limits.CardFetchTimeout}).
		Client(cfg.Limits.CardFetchTimeout, maxJWKSBytes)
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		u, err := url.Parse(a.Upstream)
		if err != nil {
			return nil, fmt.Errorf("agents[%d].upstream: %w", i, err)
		}
		edges, err := adapters.NewRoute(a.Protocol, a.JSONRPCPath)
		if err != nil {
			return nil, fmt.Errorf("agents[%d].protocol: %w", i, err)
		}
		rt := &route{agent: a, target: authz.TargetOf(a), prefix: strings.TrimSuffix(a.Route, "/"), upstream: u, edges: edges}
		rt.cards = newCardCache(c, rt)
		jku, err := jkuOf(c.publicBase(rt))
		if err != nil {
			return nil, fmt.Errorf("agents[%d]: %w", i, err)
		}
		if rt.signer, err = c.cardKey.signer(jku); err != nil {
			return nil, err
		}
		if a.CardKeys != "" {
			if rt.cardKeys, err = LoadCardKeys(a.CardKeys); err != nil {
				return nil, fmt.Errorf("agents[%d].card_keys: %w", i, err)
			}
		}
		c.routes = append(c.routes, rt)
		c.byName[a.Name] = rt
		c.byHost = c.byHost || len(a.Hosts) > 0
	}
	sort.SliceStable(c.routes, func(i, j int) bool { return len(c.routes[i].prefix) > len(c.routes[j].prefix) })
	if cfg.Egress.Enabled() {
		var err error
		if c.egress, err = newEgress(c, &cfg.Egress); err != nil {
			return nil, err
		}
	}
	if d.Follow != nil {
		// Last: a follower may resume followed tasks at once, on these routes.
		c.follower = d.Follow(c)
	}
	return c, nil
}

// NewTransport is the transport writ's upstream requests use by default: never
// an environment proxy, bounded idle connections, the answer's headers within
// timeout.
func NewTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never send agent traffic through an environment proxy
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		ForceAttemptHTTP2:     false,
	}
}

// NewClient is an http.Client over t that never follows redirects: an
// upstream redirect goes back to the caller.
func NewClient(t http.RoundTripper) *http.Client {
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// Close stops the background work of the core (the task follower).
func (c *Core) Close() {
	if c.follower != nil {
		c.follower.Close()
	}
}

// Stats returns the core's counters.
func (c *Core) Stats() *Stats { return &c.stats }

// StoreErrors counts the lifecycle store operations that failed.
func (c *Core) StoreErrors() uint64 { return c.stats.StoreErrors.Load() }

// StoreCancellations counts the lifecycle store operations a caller's own
// cancellation cut short: no fault of the store (the request was refused).
func (c *Core) StoreCancellations() uint64 { return c.stats.Cancelled.Load() }

// acceptedSchemes are the security schemes a published card advertises: what
// writ verifies, not what the agent behind it does.
func acceptedSchemes(cfg *config.Config) []task.SecurityScheme {
	var out []task.SecurityScheme
	if len(cfg.Identity.JWT) > 0 {
		out = append(out, task.SecurityScheme{Name: "bearer", Kind: task.SchemeHTTP, HTTPScheme: "Bearer",
			BearerFormat: "JWT", Description: "A JWT from " + issuers(cfg)})
	}
	if cfg.Identity.MTLS != nil {
		out = append(out, task.SecurityScheme{Name: "mtls", Kind: task.SchemeMTLS,
			Description: "A client certificate with a SPIFFE ID in " + cfg.Identity.MTLS.TrustDomain})
	}
	if cfg.Identity.StaticTokensFile != "" && len(cfg.Identity.JWT) == 0 {
		out = append(out, task.SecurityScheme{Name: "bearer", Kind: task.SchemeHTTP, HTTPScheme: "Bearer",
			Description: "A development token"})
	}
	return out
}

func issuers(cfg *config.Config) string {
	var names []string
	for _, j := range cfg.Identity.JWT {
		names = append(names, j.Issuer)
	}
	return strings.Join(names, ", ")
}
