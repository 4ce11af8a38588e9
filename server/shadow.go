package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/events"
)

// startShadowPolicy loads the shadow policy set (policies_shadow:) through
// the gate the live set passed (opt: its Rego tests, the configuration's
// known requests, the AuthZEN rules), and its reloader. Without the key,
// nothing.
func (s *Server) startShadowPolicy(ctx context.Context, opt authz.LoadOptions) error {
	var p *authz.Policy
	var err error
	switch {
	case s.cfg.PolicyBundleShadow != nil:
		if s.shadowBundle, p, err = s.firstBundle(ctx, "policy_bundle_shadow", s.cfg.PolicyBundleShadow, opt); err != nil {
			return err
		}
	case len(s.cfg.PoliciesShadow) > 0:
		if p, err = loadShadow(ctx, s.cfg, opt); err != nil {
			return err
		}
	default:
		return nil
	}
	// Its own cache: the shadow's decisions never answer a request.
	if s.shadowEngine, err = authz.NewEngine(p, authz.Options{CacheSize: s.cfg.DecisionCacheSize, Logger: s.log}); err != nil {
		return err
	}
	log := s.log.With("policy_set", "shadow")
	if s.shadowBundle != nil {
		s.shadowReloader = authz.NewSourceReloader(s.shadowEngine, s.shadowBundle.src.load, opt, log)
		s.shadowBundle.reloader = s.shadowReloader
		s.errs.add(componentPolicyBundle)
	} else {
		s.shadowReloader = authz.NewReloader(s.shadowEngine, s.cfg.PoliciesShadow, opt, log)
	}
	s.shadowReloader.After = func(r authz.ReloadResult) { s.activations.reloaded("writ-shadow", r) }
	return nil
}

// startShadow starts the shadow's worker, which reports disagreements on
// the bus (the decision log's shadow_disagreement lines, the metrics). It
// stops after the core (no more offers) and before the decision log (its
// last lines are written).
func (s *Server) startShadow() {
	if s.shadowEngine == nil {
		return
	}
	bus := s.bus
	s.shadow = authz.NewShadow(s.shadowEngine, authz.ShadowOptions{Queue: s.cfg.ShadowQueueSize(), Logger: s.log,
		Report: func(d authz.ShadowDisagreement) { bus.ShadowDisagreed(shadowEvent(d)) }})
	s.started("shadow", s.shadow.Close)
}

// shadowEvent is a disagreement as the observers see it.
func shadowEvent(d authz.ShadowDisagreement) events.ShadowDisagreement {
	v := func(x authz.ShadowVerdict) events.ShadowVerdict {
		return events.ShadowVerdict{Allow: x.Allow, Codes: x.Codes, Revision: x.Revision}
	}
	return events.ShadowDisagreement{Time: d.Time, DecisionID: d.DecisionID, Route: d.Route, Operation: d.Operation,
		Live: v(d.Live), Shadow: v(d.Shadow), Direction: d.Direction, Code: d.Code}
}

// decider is what the core decides with: the live engine, beside the shadow
// when there is one.
func (s *Server) decider() interface {
	Decide(context.Context, *authz.Input) (authz.Decision, error)
	RequiredScopes(string) []string
} {
	if s.shadow != nil {
		return authz.Shadowed{Engine: s.engine, Shadow: s.shadow}
	}
	return s.engine
}

// Shadow is the shadow policy set's evaluator; nil without policies_shadow:.
func (s *Server) Shadow() *authz.Shadow { return s.shadow }

// reloaders are the policy sets' reloaders: the live one (when its files
// can change) and the shadow's.
func (s *Server) reloaders() []*authz.Reloader {
	var out []*authz.Reloader
	if s.reloader != nil {
		out = append(out, s.reloader)
	}
	if s.shadowReloader != nil {
		out = append(out, s.shadowReloader)
	}
	return out
}

// policyReloads reloads both sets as one (SIGHUP, the admin API): each
// through its own gate, a refused one keeping its last good revision. Last
// and Counts are the live set's (the shadow's are in GET /v1/policy).
type policyReloads struct {
	live, shadow *authz.Reloader
}

// Reload implements admin.Reloader.
func (r policyReloads) Reload(ctx context.Context) error {
	var errs []error
	if r.live != nil {
		errs = append(errs, r.live.Reload(ctx))
	}
	if r.shadow != nil {
		if err := r.shadow.Reload(ctx); err != nil {
			errs = append(errs, fmt.Errorf("policies_shadow (the last good shadow keeps running): %w", err))
		}
	}
	return errors.Join(errs...)
}

// Last implements admin.Reloader.
func (r policyReloads) Last() authz.ReloadResult {
	if r.live != nil {
		return r.live.Last()
	}
	return r.shadow.Last()
}

// Counts implements admin.Reloader.
func (r policyReloads) Counts() (ok, failed uint64) {
	if r.live != nil {
		return r.live.Counts()
	}
	return r.shadow.Counts()
}
