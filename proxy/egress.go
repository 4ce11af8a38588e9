package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy/link"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// Egress: the calls a protected agent makes itself, through writ's egress
// listener (the door is proxy/egress). They are admitted by the same Admit,
// with the roles swapped: the caller is the local agent (egress.agent)
// acting inside the inbound request that caused the call — linked by the
// Writ-Parent header, which names that request's decision — and the target
// is a remote agent of egress.targets[], a second route table. The decision
// is the same policy's, with input.direction "egress". An allowed call's
// Plan carries a Delegation: what the door asks the STS for (RFC 8693
// exchange: the inbound token as the subject, the target's audience, the
// scope the operation needs); Plan.Delegate checks the token it got against
// the decision and puts it on the forwarded request. Nothing of the call is
// recorded in the lifecycle store: the remote agent's own writ keeps its
// task's lifecycle.

// EgressCall marks an Incoming as a call the local agent makes through the
// egress listener; Incoming.Route then names the target (egress.targets[]),
// and Path is the path below it.
type EgressCall struct {
	// ParentID is the Writ-Parent the agent sent: the decision id of the
	// inbound request the call serves. "" starts a new delegation at this
	// agent, on the credential the call itself presents (Authorization).
	ParentID string
	// CardURL, when set, names the target by its card's URL
	// (egress.targets[].card_url, exactly) instead of Incoming.Route.
	CardURL string
	// Base is the URL the door serves the targets under
	// (http://127.0.0.1:PORT): a target's card and directory entry point the
	// agent back at Base/to/{name}.
	Base string
}

// ParentUnknown is the denial code of an egress call whose Writ-Parent names
// no live inbound request of the local agent.
const ParentUnknown = "PARENT_UNKNOWN"

// NoSubjectToken is the denial code of an egress call whose inbound request
// carried no bearer token to exchange (a client certificate, say).
const NoSubjectToken = "NO_SUBJECT_TOKEN"

// NoScope is the denial code of an egress call for which there is no scope to
// ask the STS for: the caller holds none of what the operation needs.
const NoScope = "NO_SCOPE_TO_DELEGATE"

// TokenExchangeFailed is the detail code of an egress call that got no
// outbound token: the STS unavailable, its answer not a token writ accepts,
// or a token for another delegation than the one decided on. Its reason is
// the failure's kind.
const TokenExchangeFailed = "TOKEN_EXCHANGE_FAILED"

// ExchangeFault is an egress call's answer when the outbound token could
// not be obtained: kind the fault's (unavailable: 503, upstream_unavailable:
// 502, ...), why the failure's short stable kind, named in the answer.
func ExchangeFault(kind task.Kind, msg, why string) *task.Fault {
	return &task.Fault{Kind: kind, Message: msg, Denials: []task.Denial{{Code: TokenExchangeFailed, Reason: why}}}
}

// egressSide is the core's egress mode: the targets, the links and the local
// agent.
type egressSide struct {
	cfg     *config.Egress
	agent   string
	targets map[string]*route
	byCard  map[string]*route // by card_url, exactly
	order   []*route          // config order, for the directory
	links   *link.Table
}

// newEgress builds the targets' route table and the link table.
func newEgress(c *Core, cfg *config.Egress) (*egressSide, error) {
	e := &egressSide{cfg: cfg, agent: cfg.Agent, targets: map[string]*route{}, byCard: map[string]*route{},
		links: link.NewTable(cfg.MaxLinkBytes, cfg.MaxLinkBytesPerCaller, cfg.LinkTTL)}
	// A target's card is fetched with the ingress card rules (bounded,
	// cached, one fetch at a time), through the SSRF guard calls leave by.
	l := c.cfg.Limits
	cards := push.NewGuard(push.GuardConfig{TrustedHosts: cfg.TrustedHosts, DialTimeout: l.CardFetchTimeout}).
		Client(l.CardFetchTimeout, maxCardBytes)
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		a := t.AsAgent()
		base := a.Upstream
		if base == "" {
			// Named by its card alone: the card's own origin until the card
			// says where the agent is (egressURL resolves every call).
			base = t.CardURL
		}
		u, err := url.Parse(base)
		if err != nil {
			return nil, fmt.Errorf("egress.targets[%d].upstream: %w", i, err)
		}
		if a.Upstream == "" {
			u = &url.URL{Scheme: u.Scheme, Host: u.Host}
		}
		edges, err := adapters.NewRoute(a.Protocol, a.JSONRPCPath)
		if err != nil {
			return nil, fmt.Errorf("egress.targets[%d].protocol: %w", i, err)
		}
		rt := &route{agent: &a, target: authz.TargetOf(&a), upstream: u, edges: edges, egress: t}
		rt.cards = newCardCache(c, rt)
		if t.CardURL != "" {
			rt.cards.source = &cardSource{url: t.CardURL, client: cards}
			e.byCard[t.CardURL] = rt
		}
		if t.CardKeys != "" {
			if rt.cardKeys, err = LoadCardKeys(t.CardKeys); err != nil {
				return nil, fmt.Errorf("egress.targets[%d].card_keys: %w", i, err)
			}
		}
		e.targets[t.Name] = rt
		e.order = append(e.order, rt)
	}
	return e, nil
}

// egressURL points an egress plan for a target named by its card at where
// the call goes: the card itself for the card, else, for a target without
// an upstream, below the base URL its card names (the card fetched with the
// call's outbound token, auth, and checked as the target requires). A
// refusal is the answer.
func (p *Plan) egressURL(ctx context.Context, auth string) *task.Fault {
	x := p.x
	t := x.rt.egress
	switch {
	case t.CardURL == "":
		return nil
	case x.req.Operation == task.OpCard:
		u, err := url.Parse(t.CardURL)
		if err != nil {
			return task.NewFault(task.KindInternal, "the target's card_url is not a URL")
		}
		p.URL = u
		return nil
	case t.Upstream != "":
		return nil
	}
	card, _, err := x.rt.cards.getAs(ctx, auth)
	var base *url.URL
	if err == nil {
		base, err = cardBase(card)
	}
	if err != nil {
		p.core.log.Warn("egress: the target's card does not say where it is; refused", "target", x.rt.agent.Name,
			"card_url", t.CardURL, "error", err)
		if r := (*CardRefusedError)(nil); errors.As(err, &r) || errors.Is(err, errNoBase) {
			return task.NewFault(task.KindUpstreamInvalid, "the agent's card is not valid")
		}
		return task.NewFault(task.KindUpstreamUnavailable, "the agent's card could not be fetched")
	}
	u := *base
	u.Path = joinPath(base.Path, x.in.Path)
	u.RawQuery = p.URL.RawQuery
	p.URL = &u
	return nil
}

// errNoBase: a card that names no interface writ can call.
var errNoBase = errors.New("the card names no http(s) interface")

// cardBase is where a card says its agent is: its first interface's URL (an
// absolute http(s) URL without user info), without a trailing slash; the
// rest of the card's interfaces are read relative to it (rebase).
func cardBase(card *task.AgentCard) (*url.URL, error) {
	for _, iface := range card.Interfaces {
		u, err := url.Parse(iface.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			continue
		}
		u.Path, u.RawPath, u.RawQuery, u.Fragment = strings.TrimSuffix(u.Path, "/"), "", "", ""
		return u, nil
	}
	return nil, errNoBase
}

// Links reports the link table's counts (zero when egress is off).
func (c *Core) Links() link.Stats {
	if c.egress == nil {
		return link.Stats{}
	}
	return c.egress.links.Stats()
}

// recordsLink reports whether a forwarded operation can cause the agent's own
// outbound calls: the ones that give it work.
func recordsLink(op task.Operation) bool { return op == task.OpSend || op == task.OpStream }

// link records what the agent's outbound calls, while it serves x, need of
// it. Called for every ingress request forwarded while egress is on.
func (c *Core) link(x *exchange) {
	if c.egress == nil || x.eg != nil || !recordsLink(x.req.Operation) || x.rt.agent.Name != c.egress.agent {
		return
	}
	var token string
	if x.caller.Method == identity.MethodJWT {
		token, _ = identity.BearerToken(x.inc.Header)
	}
	l := link.New(link.Link{DecisionID: x.dec.ID, Agent: x.rt.agent.Name, Caller: x.caller, TaskID: x.req.TaskID,
		ContextID: x.input.Task.ContextID, Classification: task.Level(x.input.Task.Classification),
		Expires: x.caller.Expires}, token)
	if !c.egress.links.Put(l) {
		c.log.Warn("egress: the request's link is larger than a caller's share (egress.max_link_bytes_per_caller); the agent's calls for it will be refused",
			"decision_id", x.dec.ID)
	}
}

// egressFacts is what an egress call's exchange knows beyond its caller.
type egressFacts struct {
	call   *EgressCall
	parent string // the inbound decision id, "" for a root call
	// token is the subject token of the exchange: the inbound caller's, or
	// on a root call the agent's own. Never logged.
	token string
	// initiator is the chain's first principal (the subject token's sub);
	// actors the act chain the outbound token must carry.
	initiator string
	actors    []string
	// event is the decision's event, held by an allowed call's plan until
	// the door knows the outbound token (Plan.Delegate, Plan.Undelegated).
	event *events.Decision
}

// egressCaller makes x's caller the local agent acting inside the inbound
// request its Writ-Parent names (or, on a root call, on the credential the
// call presents). A parent that names no live request of the local agent is
// refused, before the decision.
func (c *Core) egressCaller(ctx context.Context, x *exchange) *task.Fault {
	e, call := c.egress, x.inc.Egress
	x.eg = &egressFacts{call: call, parent: call.ParentID}
	var in identity.Caller
	if call.ParentID != "" {
		l, ok := e.links.Get(call.ParentID)
		if !ok || l.Agent != e.agent {
			// A parent of another agent is answered like a missing one.
			c.log.Info("egress: Writ-Parent names no live inbound request of this agent; refused",
				"parent", call.ParentID, "agent", e.agent, "known", ok)
			return denied(ParentUnknown, "Writ-Parent names no inbound request this agent is serving (unknown, or expired)")
		}
		in, x.eg.token = l.Caller, l.Token()
		x.req.Classification = task.Max(x.req.Classification, l.Classification)
	} else {
		in, x.idErr = c.identify(ctx, x.inc)
		if in.Method == identity.MethodJWT {
			x.eg.token, _ = identity.BearerToken(x.inc.Header)
		}
	}
	x.caller = outboundCaller(in, e.agent, e.cfg.Exchange.Issuer)
	x.eg.initiator, _ = in.Claims["sub"].(string)
	x.eg.actors = append(slices.Clone(x.caller.Chain), e.agent)
	return nil
}

// outboundCaller is the caller of an egress decision: the local agent, with
// the authority of the inbound caller it acts for — its user, tenant, scope,
// classification ceiling and chain id — and the chain grown by the inbound
// caller. It is the caller the target's own writ will see in the exchanged
// token (writ sts's rules: sts/exchange.go chainOf and nextAct), so the same
// policy decides the same way on both sides of the hop.
func outboundCaller(in identity.Caller, local, issuer string) identity.Caller {
	sub, _ := in.Claims["sub"].(string)
	_, hasAct := in.Claims["act"]
	var chain []string
	switch {
	case hasAct:
		chain = append(slices.Clone(in.Chain), in.AgentID)
	case in.AgentID != "" && in.AgentID != sub && in.AgentID != local:
		// A token without act was issued to its azp agent: the hop before
		// this one. (The agent's own token starts the chain here.)
		chain = []string{in.AgentID}
	}
	out := identity.Caller{Authenticated: in.Authenticated, Method: identity.MethodJWT, Issuer: issuer,
		AgentID: local, UserID: sub, Tenant: in.Tenant, Scopes: in.Scopes, Chain: chain, ChainID: in.ChainID,
		Classification: in.Classification, Expires: in.Expires}
	if !in.Authenticated {
		out.Method, out.Issuer, out.UserID = identity.MethodAnonymous, "", ""
	}
	out.Hops = outboundHops(in, chain, local)
	return out
}

// outboundHops is what each actor of the outbound chain held: the inbound
// hops where the inbound token records them (a bare hop where it records
// none), then this agent with the inbound token's own grants, as the
// exchanged token's act records them. nil when nothing is recorded at all.
func outboundHops(in identity.Caller, chain []string, local string) []identity.Hop {
	hops := make([]identity.Hop, 0, len(chain)+1)
	granted := false
	for i, a := range chain {
		h := identity.Hop{AgentID: a}
		if len(in.Hops) == len(chain) && in.Hops[i].AgentID == a {
			h = in.Hops[i]
		}
		granted = granted || h.HasScopes || h.Tenant != "" || h.Classification != ""
		hops = append(hops, h)
	}
	own := identity.Hop{AgentID: local, Scopes: in.Scopes, HasScopes: len(in.Scopes) > 0, Tenant: in.Tenant,
		Classification: in.Classification}
	granted = granted || own.HasScopes || own.Tenant != "" || own.Classification != ""
	if !granted {
		return nil
	}
	return append(hops, own)
}

// denied is a refusal with one denial code, as the policy's are rendered.
func denied(code, msg string) *task.Fault {
	return &task.Fault{Kind: task.KindDenied, Message: msg, Denials: []task.Denial{{Code: code, Reason: msg}}}
}

// egressEvent adds an egress decision's custody fields to its event.
func (c *Core) egressEvent(x *exchange, ev *events.Decision) {
	ev.Direction = events.DirectionEgress
	ev.Route = c.egress.agent
	ev.Target = x.rt.agent.Name
	ev.ParentDecisionID = x.eg.parent
	ev.Initiator = x.eg.initiator
	ev.Intermediaries = x.eg.actors
}

// Delegation is what an allowed egress call needs before it is forwarded:
// the outbound token, which the egress door obtains by RFC 8693 exchange.
type Delegation struct {
	// SubjectToken is the exchange's subject token: the inbound caller's
	// (the agent's own on a root call). Never log it.
	SubjectToken string
	// Audience is the target's (egress.targets[].audience).
	Audience string
	// Scope is what the hop needs: the operation's required scopes (or the
	// target's configured ones) that the caller holds. Never empty.
	Scope []string
	// Actors is the act chain the outbound token must carry, oldest first,
	// this agent last: the chain the decision was about.
	Actors []string
	// ChainID is the inbound chain id; "" when the exchange starts one.
	ChainID string
	// Subject is the delegation's first principal, which the outbound token
	// keeps as its sub.
	Subject string
}

// String prints the delegation without its subject token.
func (d Delegation) String() string {
	return fmt.Sprintf("delegation{audience %s, scope %v, actors %v, chain %s}", d.Audience, d.Scope, d.Actors, d.ChainID)
}

// GoString prints the delegation without its subject token (%#v).
func (d Delegation) GoString() string { return d.String() }

// delegation is what x's call needs, or the refusal when it cannot be made:
// no subject token, or no scope to ask for.
func (c *Core) delegation(x *exchange) (*Delegation, *task.Fault) {
	if x.eg.token == "" {
		c.log.Info("egress: the inbound request carried no bearer token to exchange; refused",
			"parent", x.eg.parent, "target", x.rt.agent.Name, "caller_method", x.caller.Method)
		return nil, denied(NoSubjectToken, "the request this call serves carried no bearer token to exchange for the target")
	}
	want := x.rt.egress.Scopes
	if len(want) == 0 {
		op := string(x.req.Operation)
		if want = c.engine.RequiredScopes(op); len(want) == 0 {
			// A follow-up (get, cancel's kin, the card) rides on the
			// authority of the delegation itself.
			want = c.engine.RequiredScopes(string(task.OpSend))
		}
	}
	var scope []string
	for _, s := range want {
		if slices.Contains(x.caller.Scopes, s) && !slices.Contains(scope, s) {
			scope = append(scope, s)
		}
	}
	if len(scope) == 0 {
		c.log.Info("egress: the caller holds none of the scopes the call needs; refused", "wanted", want,
			"target", x.rt.agent.Name, "operation", x.req.Operation, "decision_id", x.dec.ID)
		return nil, denied(NoScope, "the caller holds none of the scopes this call needs")
	}
	return &Delegation{SubjectToken: x.eg.token, Audience: x.rt.egress.Audience, Scope: scope, Actors: x.eg.actors,
		ChainID: x.caller.ChainID, Subject: x.eg.initiator}, nil
}

// Delegation is what the plan needs before it goes out (an egress plan), nil
// for an ingress plan.
func (p *Plan) Delegation() *Delegation { return p.delegation }

// Delegated is the outbound token the egress door obtained, as the exchange
// verified it.
type Delegated struct {
	Token   string
	ChainID string
	// Actors is its act chain, oldest first, the calling agent last.
	Actors []string
	// Subject is its sub.
	Subject string
}

// Delegate checks the outbound token against the decision — the chain it
// carries is the one decided on, grown by this agent alone; the chain id and
// the subject are kept — points a call to a target named by its card where
// its card says (egressURL: the card fetched with that token), puts the
// token on the forwarded request in place of whatever credential the agent
// sent, and records the egress decision with the token's chain id and
// actors. refused, when set, replaces the answer and nothing is forwarded;
// why is then DelegateChainMismatch or DelegateCard.
func (p *Plan) Delegate(ctx context.Context, t Delegated) (refused *wire.Rendered, why string) {
	d, x := p.delegation, p.x
	if d == nil || x.eg.event == nil {
		out := p.Fail(task.NewFault(task.KindInternal, "the call has no delegation to make"))
		return &out, "internal"
	}
	var mismatch string
	switch {
	case t.Token == "":
		mismatch = "no token"
	case !slices.Equal(t.Actors, d.Actors):
		mismatch = fmt.Sprintf("act chain %v, decided %v", t.Actors, d.Actors)
	case d.ChainID != "" && t.ChainID != d.ChainID:
		mismatch = fmt.Sprintf("chain id %q, decided %q", t.ChainID, d.ChainID)
	case d.Subject != "" && t.Subject != d.Subject:
		mismatch = fmt.Sprintf("subject %q, decided %q", t.Subject, d.Subject)
	}
	if mismatch != "" {
		p.core.log.Error("egress: the STS's token does not carry the delegation writ decided on; nothing is forwarded",
			"why", mismatch, "decision_id", x.dec.ID, "target", x.rt.agent.Name)
		out := p.Undelegated(ExchangeFault(task.KindUpstreamUnavailable, "the token service's token does not carry the delegation writ decided on", DelegateChainMismatch), DelegateChainMismatch)
		return &out, DelegateChainMismatch
	}
	ev := x.eg.event
	ev.ChainID, ev.Intermediaries = t.ChainID, t.Actors
	if f := p.egressURL(ctx, "Bearer "+t.Token); f != nil {
		out := p.refuseCall(f, DelegateCard)
		return &out, DelegateCard
	}
	p.Header.Set("Authorization", "Bearer "+t.Token)
	x.eg.event = nil
	p.delegated = true
	p.core.events.Decided(*ev)
	return nil, ""
}

// Why Delegate refused a call: the token carries another delegation than the
// one decided on, or the target's card (named by card_url) could not say
// where the call goes. Each is also the egress decision's refused.
const (
	DelegateChainMismatch = "chain_mismatch"
	DelegateCard          = "card"
)

// Undelegated records the egress decision of a call whose outbound token
// could not be obtained (why: a short stable reason, such as the exchange
// error's kind) and renders f as the agent's answer.
func (p *Plan) Undelegated(f *task.Fault, why string) wire.Rendered {
	return p.refuseCall(f, "exchange:"+why)
}

// refuseCall records the egress decision of a call that is not forwarded
// after all (refused: why, as the decision's refused) and renders f.
func (p *Plan) refuseCall(f *task.Fault, refused string) wire.Rendered {
	if ev := p.x.eg.event; ev != nil {
		p.x.eg.event = nil
		ev.Refused = refused
		p.core.events.Decided(*ev)
	}
	return p.Fail(f)
}

// egressCard rewrites the target's card, as its writ served it, for the
// local agent: its interfaces point back at the egress listener
// (Base/to/{name}), so the agent's client sends every call through writ,
// and it advertises no security scheme (writ puts the credential on).
func (p *Plan) egressCard(ctx context.Context, status int, body []byte) ([]byte, *wire.Rendered) {
	x := p.x
	cards, ok := x.rt.edges.Cards()
	if !ok || status != http.StatusOK {
		return body, nil
	}
	// What is read is what a signature covers (when the target requires
	// one): the verified content, never the bytes around it.
	body, err := p.core.checkCard(ctx, x.rt, cards, body)
	var card *task.AgentCard
	var version string
	if err == nil {
		card, version, err = cards.ParseCard(body)
	}
	up := x.rt.upstream
	if err == nil && x.rt.egress.Upstream == "" {
		// Named by its card alone: its interfaces are read against the
		// base the card itself names, and the calls that follow go there.
		if up, err = cardBase(card); err == nil {
			x.rt.cards.put(card, version)
		}
	}
	if err == nil {
		card = egressPublish(x.rt, up, card, x.eg.call.Base)
		body, err = cards.RenderCard(card, version)
	}
	if err != nil {
		p.invalid++
		p.core.log.Warn("egress: the target's card could not be read; refused", "target", x.rt.agent.Name, "error", err)
		out := p.Fail(task.NewFault(task.KindUpstreamInvalid, "the agent's card is not valid"))
		return nil, &out
	}
	return body, nil
}

// egressPublish is a target's card as the local agent sees it through the
// egress listener at base.
func egressPublish(rt *route, upstream *url.URL, up *task.AgentCard, base string) *task.AgentCard {
	card := *up
	at := base + "/to/" + url.PathEscape(rt.agent.Name)
	card.Interfaces = nil
	for _, iface := range up.Interfaces {
		iface.URL = rebase(iface.URL, at, upstream)
		card.Interfaces = append(card.Interfaces, iface)
	}
	if len(card.Interfaces) == 0 {
		card.Interfaces = []task.Interface{{URL: at}}
	}
	card.SecuritySchemes, card.Security = nil, nil
	return &card
}

// egressDirectory lists the targets the local agent may delegate to for the
// task its Writ-Parent names: a target is listed when the policy would let
// the agent discover it and send it that task (its tenant, the task's
// classification, the chain's depth and cycles, the scopes). Each target is
// one decision (discover, logged like the ingress directory's); the send is
// asked dry. Entries are described from writ's config, pointing at the
// egress listener: the agent's model sees only candidates it may use.
func (c *Core) egressDirectory(ctx context.Context, inc Incoming, renderer adapters.CardRenderer, start time.Time) Outcome {
	base := &exchange{inc: inc, req: task.Request{Operation: task.OpDiscover, Protocol: task.Protocol{Name: "writ", Method: inc.Method + " " + inc.Path}}}
	if f := c.egressCaller(ctx, base); f != nil {
		return plainRefusal(f.Kind, f.Message+" ("+ParentUnknown+")")
	}
	wanted := wantedTags(inc)
	type entry struct {
		overlap int
		card    *task.AgentCard
	}
	var visible []entry
	for _, rt := range c.egress.order {
		x := &exchange{rt: rt, inc: inc, caller: base.caller, req: base.req, eg: base.eg}
		ev := c.decide(ctx, x, start)
		allowed := x.dec.Allow
		if allowed {
			send := &exchange{rt: rt, inc: inc, caller: base.caller, eg: base.eg,
				req: task.Request{Operation: task.OpSend, Protocol: base.req.Protocol, Classification: base.req.Classification}}
			c.decide(ctx, send, start) // dry: its event is not emitted
			allowed = send.dec.Allow
		}
		if !allowed {
			ev.Refused = "not_listed"
		}
		c.events.Decided(ev)
		if !allowed {
			continue
		}
		overlap := tagOverlap(rt.target.Skills, wanted)
		if len(wanted) > 0 && overlap == 0 {
			continue
		}
		card := egressPublish(rt, rt.upstream, &task.AgentCard{Name: rt.agent.Name, Skills: rt.target.Skills}, inc.Egress.Base)
		visible = append(visible, entry{overlap, card})
	}
	slices.SortStableFunc(visible, func(a, b entry) int { return b.overlap - a.overlap })
	cards := make([]*task.AgentCard, len(visible))
	for i, e := range visible {
		cards[i] = e.card
	}
	return c.renderDirectory(renderer, cards)
}
