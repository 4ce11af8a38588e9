package main

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

// validateCmd runs `writ validate`: the loading the sidecar does at start
// (config keys, identity sources, policies compiled and tested), then what
// would load but cannot work — no identity source, a JWKS URL that does not
// answer, a claim a sample token does not have, an agent the policy can
// never admit a caller to (the policy's reachability; -probe asks the agents
// themselves, as /readyz does). Problems are printed as file:line: key:
// message; errors make the exit status 1, warnings do not.
func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("validate", "writ validate [-config writ.yaml] [-token JWT] [-offline] [-strict] [-probe]",
		"Checks a configuration as writ serve loads it, and what would load but cannot work. Problems go to\n"+
			"stderr as FILE:LINE: error|warning: KEY: message; errors make the exit status 1 (warnings too with -strict).")
	path := fs.String("config", "writ.yaml", "the configuration file")
	token := fs.String("token", "", "a sample token from your issuer: are the configured claim names in it? does it verify?")
	offline := fs.Bool("offline", false, "do not fetch JWKS URLs")
	strict := fs.Bool("strict", false, "warnings fail too (exit 1)")
	probe := fs.Bool("probe", false, "ask each agent what /readyz asks (its card, or its readiness path) and say what readiness would answer; an agent that does not answer fails (exit 1)")
	if done, code := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	v := &validation{path: *path, out: stderr, strict: *strict}
	cfg, err := config.Load(*path)
	if err != nil {
		var ps *config.Problems
		if errors.As(err, &ps) {
			ps.File = ""
			for _, p := range ps.List {
				v.problem("error", p)
			}
		} else {
			v.errorf(0, "", "%v", err)
		}
		return v.done(stdout, "")
	}
	v.cfg = cfg
	for _, w := range cfg.Warnings() {
		v.problem("warning", w)
	}
	if cfg.AdminTokenFile != "" {
		// Read as writ serve reads it at start: a token it would refuse fails here.
		if _, err := admin.LoadToken(cfg.AdminTokenFile); err != nil {
			v.errorf(cfg.Line("admin_token_file"), "", "%v", err) // the error names the key
		}
	}
	ctx := context.Background()
	res, err := identity.New(cfg.Identity)
	if err != nil {
		v.errorf(0, "", "%v", err)
		return v.done(stdout, "")
	}
	defer res.Close()
	if k := cfg.DecisionLog.SigningKeyFile; k != "" {
		if _, err := decisionlog.LoadSigner(k); err != nil {
			v.errorf(cfg.Line("decision_log.signing_key_file"), "decision_log.signing_key_file", "%v", err)
		}
	}
	// The card keys, read as writ serve reads them at start.
	if k := cfg.Cards.SigningKeyFile; k != "" {
		if err := proxy.CheckCardSigningKey(k); err != nil {
			v.errorf(cfg.Line("cards.signing_key_file"), "", "%v", err) // the error names the key
		}
	}
	for i, a := range cfg.Agents {
		if a.CardKeys == "" {
			continue
		}
		key := fmt.Sprintf("agents[%d].card_keys", i)
		if _, err := proxy.LoadCardKeys(a.CardKeys); err != nil {
			v.errorf(cfg.Line(key), key, "%v", err)
		}
	}
	if !*offline {
		v.jwksURLs(ctx)
	}
	for _, u := range res.DevelopmentUses() {
		v.warnf(u.Key, "%s", u.Msg)
	}
	if *token != "" {
		v.sampleToken(ctx, res, *token)
	}
	opt, err := policyOptions(cfg)
	if err != nil {
		v.errorf(0, "", "%v", err)
		return v.done(stdout, "")
	}
	p, err := loadPolicy(ctx, cfg, opt)
	if err != nil {
		v.errorf(cfg.Line("policies"), "policies", "%v", err)
		return v.done(stdout, "")
	}
	v.admission(ctx, p)
	if *probe {
		v.probe(ctx, res, p)
	}
	return v.done(stdout, fmt.Sprintf("%d agent(s), policies: %s (revision %s, %d tests passed)",
		len(cfg.Agents), policySource(cfg), p.Revision, p.Tests.Passed))
}

// validation collects what `writ validate` finds.
type validation struct {
	path             string
	cfg              *config.Config
	out              io.Writer
	errors, warnings int
	strict           bool
}

func (v *validation) problem(kind string, p config.Problem) {
	if kind == "error" {
		v.errors++
	} else {
		v.warnings++
	}
	where := v.path
	if p.Line > 0 {
		where = fmt.Sprintf("%s:%d", v.path, p.Line)
	}
	key := ""
	if p.Key != "" {
		key = p.Key + ": "
	}
	fmt.Fprintf(v.out, "%s: %s: %s%s\n", where, kind, key, p.Msg)
}

func (v *validation) errorf(line int, key, format string, args ...any) {
	v.problem("error", config.Problem{Key: key, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *validation) warnf(key, format string, args ...any) {
	v.problem("warning", config.Problem{Key: key, Line: v.cfg.Line(key), Msg: fmt.Sprintf(format, args...)})
}

func (v *validation) notef(format string, args ...any) {
	fmt.Fprintf(v.out, "%s: note: %s\n", v.path, fmt.Sprintf(format, args...))
}

func (v *validation) done(w io.Writer, summary string) int {
	if v.errors > 0 || v.strict && v.warnings > 0 {
		fmt.Fprintf(w, "invalid: %s: %d error(s), %d warning(s)\n", v.path, v.errors, v.warnings)
		return 1
	}
	fmt.Fprintf(w, "ok: %s: %s, %d warning(s)\n", v.path, summary, v.warnings)
	return 0
}

// jwksURLs fetches every identity.jwt[].jwks_url once: it must answer with a
// key set (writ serve would fetch it on a token's first use, and refuse
// every token until it answers).
func (v *validation) jwksURLs(ctx context.Context) {
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
func (v *validation) sampleToken(ctx context.Context, res *identity.Resolver, tok string) {
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
	fmt.Fprintf(v.out, "%s: note: the sample token is caller agent_id=%q user_id=%q tenant=%q scopes=%v chain=%v\n",
		v.path, caller.AgentID, caller.UserID, caller.Tenant, caller.Scopes, caller.Chain)
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
func (v *validation) admission(ctx context.Context, p *authz.Policy) {
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
// configuration — and says, per agent, what readiness would say: ready, or
// an error naming the agent's upstream. The admission check above is the
// policy's reachability (can any caller be admitted); this is the network's.
func (v *validation) probe(ctx context.Context, res *identity.Resolver, p *authz.Policy) {
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
			v.notef("-probe: %s: ready (its protocol has nothing to ask)", r.Agent)
		default:
			v.notef("-probe: %s: ready (%s answered)", r.Agent, r.Asked)
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
