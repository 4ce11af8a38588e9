package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/admin"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/task"
)

// Finding is one thing Validate reports: an error (writ serve would refuse
// the configuration), a warning (it would serve, but something cannot work),
// or a note (what a sample token says).
type Finding struct {
	// Kind is "error", "warning" or "note".
	Kind string
	config.Problem
}

// ValidateOptions are the checks Validate makes beyond loading.
type ValidateOptions struct {
	// Token is a sample token from the configured issuer: are the claim
	// names the configuration reads in it, and does it verify?
	Token string
	// Offline skips fetching identity.jwt[].jwks_url.
	Offline bool
	// Probe asks every agent what writ serve's readiness (/readyz) asks,
	// and reports per agent what readiness would say; an agent not ready is
	// an error.
	Probe bool
}

// Validation is what Validate found, in the order it found it.
type Validation struct {
	Findings []Finding
	// Summary says what loads (agents, policies, their revision and tests);
	// "" when an error stopped the checks.
	Summary string
	cfg     *config.Config
}

// Validate makes the checks New makes at start — the configuration's
// warnings, the admin token, the identity sources, the decision log's
// signing key, the card keys, the policies compiled and tested, the known
// requests decided — then what would load but cannot work: no identity source, a JWKS URL
// that does not answer, a claim a sample token does not have, an agent the
// policy can never admit a caller to; with Probe, each agent's readiness. It is `writ validate`.
func Validate(ctx context.Context, cfg *config.Config, o ValidateOptions) *Validation {
	v := &Validation{cfg: cfg}
	for _, w := range cfg.Warnings() {
		v.add("warning", w)
	}
	if cfg.AdminTokenFile != "" {
		// Read as New reads it at start: a token it would refuse fails here.
		if _, err := admin.LoadToken(cfg.AdminTokenFile); err != nil {
			v.errorf(cfg.Line("admin_token_file"), "", "%v", err) // the error names the key
		}
	}
	res, err := identity.New(cfg.Identity)
	if err != nil {
		v.errorf(0, "", "%v", err)
		return v
	}
	defer res.Close()
	if k := cfg.DecisionLog.SigningKeyFile; k != "" {
		if _, err := decisionlog.LoadSigner(k); err != nil {
			v.errorf(cfg.Line("decision_log.signing_key_file"), "decision_log.signing_key_file", "%v", err)
		}
	}
	v.cardKeys()
	if !o.Offline {
		v.jwksURLs(ctx)
	}
	for _, u := range res.DevelopmentUses() {
		v.warnf(u.Key, "%s", u.Msg)
	}
	if o.Token != "" {
		v.sampleToken(ctx, res, o.Token)
	}
	opt, err := policyOptions(cfg)
	if err != nil {
		v.errorf(0, "", "%v", err)
		return v
	}
	p, err := loadPolicy(ctx, cfg, opt)
	if errors.Is(err, errNoPersistedBundle) {
		// Not wrong: the policy is the service's, and only a serving writ
		// downloads it.
		v.warnf("policy_bundle", "%v", err)
		v.Summary = fmt.Sprintf("%d agent(s), policies: %s (not checked here)", len(cfg.Agents), policySource(cfg))
		return v
	}
	if err != nil {
		key := "policies"
		if cfg.PolicyBundle != nil {
			key = "policy_bundle"
		}
		v.errorf(cfg.Line(key), key, "%v", err)
		return v
	}
	v.admission(ctx, p)
	if o.Probe {
		v.probe(ctx, res, p)
	}
	v.Summary = fmt.Sprintf("%d agent(s), policies: %s (revision %s, %d tests passed)",
		len(cfg.Agents), policySource(cfg), p.Revision, p.Tests.Passed)
	v.shadow(ctx, opt)
	return v
}

// shadow checks the shadow set as a start would: its own Rego tests and
// the gate the live set passed. A bundle's is checked when one is
// persisted here.
func (v *Validation) shadow(ctx context.Context, opt authz.LoadOptions) {
	key := shadowKey(v.cfg)
	if key == "" {
		return
	}
	sp, err := loadShadow(ctx, v.cfg, opt)
	switch {
	case errors.Is(err, errNoPersistedBundle):
		v.warnf(key, "the shadow set: %v", err)
		v.Summary += fmt.Sprintf("; shadow: %s (not checked here)", shadowSource(v.cfg))
	case err != nil:
		v.errorf(v.cfg.Line(key), key, "%v", err)
	default:
		v.Summary += fmt.Sprintf("; shadow: %s (revision %s, %d tests passed)", shadowSource(v.cfg), sp.Revision, sp.Tests.Passed)
	}
}

// cardKeys reads the card keys as New reads them at start: writ's own
// signing key (never created here) and each agent's card_keys.
func (v *Validation) cardKeys() {
	if k := v.cfg.Cards.SigningKeyFile; k != "" {
		if err := proxy.CheckCardSigningKey(k); err != nil {
			v.errorf(v.cfg.Line("cards.signing_key_file"), "", "%v", err) // the error names the key
		}
	}
	for i, a := range v.cfg.Agents {
		if a.CardKeys == "" {
			continue
		}
		key := fmt.Sprintf("agents[%d].card_keys", i)
		if _, err := proxy.LoadCardKeys(a.CardKeys); err != nil {
			v.errorf(v.cfg.Line(key), key, "%v", err)
		}
	}
}

func (v *Validation) add(kind string, p config.Problem) {
	v.Findings = append(v.Findings, Finding{Kind: kind, Problem: p})
}

func (v *Validation) errorf(line int, key, format string, args ...any) {
	v.add("error", config.Problem{Key: key, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *Validation) warnf(key, format string, args ...any) {
	v.add("warning", config.Problem{Key: key, Line: v.cfg.Line(key), Msg: fmt.Sprintf(format, args...)})
}

// jwksURLs fetches every identity.jwt[].jwks_url once: it must answer with a
// key set (writ serve would fetch it on a token's first use, and refuse
// every token until it answers).
func (v *Validation) jwksURLs(ctx context.Context) {
	client := &http.Client{Timeout: 5 * time.Second}
	for i, iss := range v.cfg.Identity.JWT {
		if iss.JWKSURL == "" {
			continue
		}
		key := fmt.Sprintf("identity.jwt[%d].jwks_url", i)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, iss.JWKSURL, nil)
		if err != nil {
			v.errorf(v.cfg.Line(key), key, "%v", err)
			continue
		}
		resp, err := client.Do(req)
		if err != nil {
			v.errorf(v.cfg.Line(key), key, "does not answer: %v (every token of %s would be refused; -offline skips this check)", err, iss.Issuer)
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			v.errorf(v.cfg.Line(key), key, "answers %s, not a key set", resp.Status)
			continue
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) == 0 {
			v.errorf(v.cfg.Line(key), key, "answers no JSON Web Key Set (%d bytes)", len(raw))
			continue
		}
		for _, k := range set.Keys {
			if identity.IsDevelopmentKey(k) {
				v.warnf(key, "its JWKS holds writ's development key (kid %q): anyone with the key directory of writ dev signs any caller as %s", k.KeyID, iss.Issuer)
			}
		}
	}
}

// sampleToken reads a token from the issuer writ is configured for: its
// issuer must be configured, its audience accepted, and the claims the
// issuer's config names (tenant, scopes, classification) present; then it
// is verified as writ serve would.
func (v *Validation) sampleToken(ctx context.Context, res *identity.Resolver, tok string) {
	claims, err := unverifiedClaims(tok)
	if err != nil {
		v.errorf(0, "", "-token: %v", err)
		return
	}
	iss, _ := claims["iss"].(string)
	idx := slices.IndexFunc(v.cfg.Identity.JWT, func(j config.JWTIssuer) bool { return j.Issuer == iss })
	if idx < 0 {
		v.warnf("identity.jwt", "the sample token's issuer %q is none of identity.jwt[].issuer: writ would refuse it", iss)
		return
	}
	ic := v.cfg.Identity.JWT[idx]
	have := make([]string, 0, len(claims))
	for k := range claims {
		have = append(have, k)
	}
	sort.Strings(have)
	present := func(names ...string) bool {
		for _, n := range names {
			if _, ok := claims[n]; ok {
				return true
			}
		}
		return false
	}
	for _, c := range []struct{ key, set string }{
		{"tenant_claim", ic.TenantClaim}, {"scope_claim", ic.ScopeClaim}, {"classification_claim", ic.ClassificationClaim}} {
		names := []string{c.set}
		if c.set == "" {
			names = map[string][]string{"tenant_claim": {"tenant"}, "scope_claim": {"scope", "scp"},
				"classification_claim": {"classification", "data_classification"}}[c.key]
		}
		if !present(names...) {
			key := fmt.Sprintf("identity.jwt[%d].%s", idx, c.key)
			what := "is not set, so writ reads " + strings.Join(names, " or ")
			if c.set != "" {
				what = fmt.Sprintf("is %q", c.set)
			}
			v.warnf(key, "%s, which the sample token does not have (it has %s)", what, strings.Join(have, ", "))
		}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	caller, err := res.Identify(ctx, identity.Credentials{Header: h})
	if err != nil {
		v.warnf(fmt.Sprintf("identity.jwt[%d]", idx), "the sample token does not verify: %v", err)
		return
	}
	v.add("note", config.Problem{Msg: fmt.Sprintf("the sample token is caller agent_id=%q user_id=%q tenant=%q scopes=%v chain=%v",
		caller.AgentID, caller.UserID, caller.Tenant, caller.Scopes, caller.Chain)})
}

// unverifiedClaims decodes a JWT's payload without verifying it (validate
// verifies it separately, with the configured keys).
func unverifiedClaims(tok string) (map[string]any, error) {
	parts := strings.Split(strings.TrimSpace(strings.TrimPrefix(tok, "Bearer ")), ".")
	if len(parts) != 3 {
		return nil, errors.New("not a JWT (three base64url parts)")
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("the payload is not base64url: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, fmt.Errorf("the payload is not a JSON object: %w", err)
	}
	return claims, nil
}

// callerMethods are the ways a caller can authenticate, and whether this
// configuration identifies callers that way.
func callerMethods(cfg *config.Config) map[string]bool {
	return map[string]bool{
		identity.MethodJWT:    len(cfg.Identity.JWT) > 0 || cfg.Envoy.JWTAuthn != nil,
		identity.MethodMTLS:   cfg.Identity.MTLS != nil,
		identity.MethodStatic: cfg.Identity.StaticTokensFile != "",
	}
}

// noAcceptableAuth is the policy's denial of a caller whose way of
// authenticating none of the target's security schemes accepts.
const noAcceptableAuth = "NO_ACCEPTABLE_AUTH"

// admission evaluates the policy on a representative request per agent (a
// real A2A send, from each way of authenticating, by a caller of a tenant
// the agent serves) and reports an agent whose security_schemes the policy
// admits no caller to: the rules are the policy's, not a copy in Go.
func (v *Validation) admission(ctx context.Context, p *authz.Policy) {
	engine, err := authz.NewEngine(p, authz.Options{CacheSize: -1})
	if err != nil {
		v.errorf(0, "policies", "%v", err)
		return
	}
	req, in, err := representative()
	if err != nil {
		v.errorf(0, "", "%v", err)
		return
	}
	methods := callerMethods(v.cfg)
	names := callerMethodNames
	for i := range v.cfg.Agents {
		a := &v.cfg.Agents[i]
		admits := map[string]bool{}
		var reason string
		for _, m := range names {
			d, err := engine.Decide(ctx, representativeInput(v.cfg, a, &req, in, m))
			if err != nil {
				v.errorf(0, fmt.Sprintf("agents[%d]", i), "the policy fails on a representative request: %v", err)
				return
			}
			denied := slices.ContainsFunc(d.Denials, func(x task.Denial) bool { return x.Code == noAcceptableAuth })
			admits[m] = !denied
			if denied && reason == "" {
				for _, x := range d.Denials {
					if x.Code == noAcceptableAuth {
						reason = x.Reason
					}
				}
			}
		}
		var configured, other []string
		for _, m := range names {
			if admits[m] && methods[m] {
				configured = append(configured, m)
			} else if admits[m] {
				other = append(other, m)
			}
		}
		if len(configured) > 0 {
			continue
		}
		// A warning: writ serves the rest, and an agent nobody may reach
		// can be deliberate (the demo shows NO_ACCEPTABLE_AUTH with one).
		key := fmt.Sprintf("agents[%d].security_schemes", i)
		switch {
		case len(other) == 0:
			v.warnf(key, "%v: the policy admits no caller to %s, however it authenticates (%s: %s)",
				a.SecuritySchemes, a.Name, noAcceptableAuth, reason)
		default:
			v.warnf(key, "%v: the policy admits only %s callers to %s, and no identity source of this configuration identifies one (configure %s)",
				a.SecuritySchemes, strings.Join(other, " or "), a.Name, identitySourceFor(other[0]))
		}
	}
}

// probe asks every agent what writ serve's readiness (/readyz) asks it —
// the same code, proxy.Core.Readiness, on a core built from this
// configuration — and says, per agent, what readiness would say: a note
// when it is ready, an error on its upstream key when it is not. The
// admission check is the policy's reachability (can any caller be
// admitted); this is the network's.
func (v *Validation) probe(ctx context.Context, res *identity.Resolver, p *authz.Policy) {
	engine, err := authz.NewEngine(p, authz.Options{CacheSize: -1})
	if err != nil {
		v.errorf(0, "policies", "%v", err)
		return
	}
	// A copy that writes nothing: writ's card signing key is generated for
	// the probe and never written (validate creates no file), and egress,
	// which the probe does not use, is off.
	cfg := *v.cfg
	cfg.Cards.SigningKeyFile = ""
	cfg.Egress = config.Egress{}
	core, err := proxy.New(&cfg, proxy.Deps{Identity: res, Engine: engine,
		Store: task.NewMemoryStore(task.MemoryLimits{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		v.errorf(0, "", "-probe: %v", err)
		return
	}
	defer core.Close()
	idx := map[string]int{}
	for i, a := range v.cfg.Agents {
		idx[a.Name] = i
	}
	for _, r := range core.Readiness(ctx) {
		key := fmt.Sprintf("agents[%d].upstream", idx[r.Agent])
		switch {
		case r.Err != nil:
			v.errorf(v.cfg.Line(key), key, "-probe: not ready: %v (writ serve's /readyz would answer 503 with this)", r.Err)
		case r.Asked == "":
			v.add("note", config.Problem{Msg: fmt.Sprintf("-probe: %s: ready (its protocol has nothing to ask)", r.Agent)})
		default:
			v.add("note", config.Problem{Msg: fmt.Sprintf("-probe: %s: ready (%s answered)", r.Agent, r.Asked)})
		}
	}
}

func identitySourceFor(method string) string {
	switch method {
	case identity.MethodMTLS:
		return "identity.mtls and tls.client_ca_file"
	case identity.MethodStatic:
		return "identity.static_tokens_file"
	}
	return "identity.jwt"
}
