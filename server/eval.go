package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

// EvalRequest is one request for Eval: its message and who sends it.
type EvalRequest struct {
	// Message is a whole HTTP/1.1 request message (see wire.ReadExample).
	Message []byte
	// Agent names the target agent; "" routes by the request's path.
	Agent string
	// Token is a bearer token to verify instead of the request's own
	// Authorization header.
	Token string
	// CallerFile is a JSON caller to use as is, unverified (testing
	// policies); it takes precedence over any credential.
	CallerFile string
	// Explain lists the rules that fired.
	Explain bool
}

// EvalResult is what Eval found: the fault the protocol's parser answers,
// or the policy input and the decision. It is what `writ eval` prints.
type EvalResult struct {
	Input    *authz.Input  `json:"input"`
	Decision EvalDecision  `json:"decision"`
	Explain  []authz.Fired `json:"explain,omitempty"`
	// Identity says why the credentials were refused (the caller is then
	// anonymous).
	Identity string      `json:"identity_error,omitempty"`
	Fault    *task.Fault `json:"fault,omitempty"`
	// DecideErr is the policy's failure (the request would be denied: fail
	// closed); ExplainErr is explaining's.
	DecideErr  error `json:"-"`
	ExplainErr error `json:"-"`
}

// EvalDecision is the decision as `writ eval` prints it.
type EvalDecision struct {
	Allow    bool          `json:"allow"`
	Denials  []task.Denial `json:"denials"`
	Revision string        `json:"revision"`
}

// Eval decides one request as writ serve would with cfg: routed to its
// agent, parsed by the protocol's adapter, its caller identified by the
// configured sources, the input built and the policy asked (no cache, no
// known-request check: a policy that fails shows its error in DecideErr).
// An error means the request could not be decided at all.
func Eval(ctx context.Context, cfg *config.Config, r EvalRequest) (*EvalResult, error) {
	lim := wire.Limits{MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxJSONDepth: cfg.Limits.MaxJSONDepth}
	in, err := wire.ReadExample(r.Message, lim.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	agent, rest, ok := cfg.Route(in.Path)
	if r.Agent != "" {
		agent, ok = cfg.Agent(r.Agent)
		rest = in.Path
	}
	if !ok {
		return nil, fmt.Errorf("no agent routes %s (use -agent)", in.Path)
	}
	fullPath := in.Path
	in.Path = rest
	edges, err := adapters.NewRoute(agent.Protocol, agent.JSONRPCPath)
	if err != nil {
		return nil, err
	}
	req, fault := edges.For(in.Path).Parse(in, lim)
	if fault != nil {
		return &EvalResult{Fault: fault}, nil //nolint:nilerr // the fault is the answer the request gets, not a failure to decide
	}
	out := &EvalResult{}
	caller, idErr := evalCaller(ctx, cfg, in.Header, r.Token, r.CallerFile)
	if idErr != nil && r.CallerFile != "" {
		return nil, idErr
	}
	if idErr != nil {
		out.Identity = idErr.Error()
	}
	// The configuration's facts, but no known requests: a policy that fails
	// shows its error in the decision.
	p, err := loadPolicy(ctx, cfg, authz.LoadOptions{Facts: cfg.PolicyFacts()})
	if err != nil {
		return nil, err
	}
	engine, err := authz.NewEngine(p, authz.Options{CacheSize: -1})
	if err != nil {
		return nil, err
	}
	out.Input = authz.BuildInput(&authz.Facts{Request: &req, Caller: caller, Target: authz.TargetOf(agent),
		HTTP:                  authz.HTTPInfo{Method: in.Method, Path: fullPath, Host: in.Header.Get("Host")},
		DefaultClassification: cfg.DefaultClassification})
	d, err := engine.Decide(ctx, out.Input)
	out.DecideErr = err
	out.Decision = EvalDecision{Allow: d.Allow, Denials: d.Denials, Revision: d.Revision}
	if out.Decision.Denials == nil {
		out.Decision.Denials = []task.Denial{}
	}
	if r.Explain {
		out.Explain, out.ExplainErr = p.Explain(ctx, out.Input)
	}
	return out, nil
}

// evalCaller identifies the caller: a caller file as is, else the token (or
// the request's Authorization header) through the configured identity
// sources.
func evalCaller(ctx context.Context, cfg *config.Config, h http.Header, token, callerFile string) (identity.Caller, error) {
	if callerFile != "" {
		raw, err := os.ReadFile(callerFile)
		if err != nil {
			return identity.Anonymous(), err
		}
		var c identity.Caller
		if err := json.Unmarshal(raw, &c); err != nil {
			return identity.Anonymous(), fmt.Errorf("%s: %w", callerFile, err)
		}
		return c, nil
	}
	res, err := identity.New(cfg.Identity)
	if err != nil {
		return identity.Anonymous(), err
	}
	defer res.Close()
	hdr := h.Clone()
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	return res.Identify(ctx, identity.Credentials{Header: hdr})
}
