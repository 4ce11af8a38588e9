package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

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
	// Policies are a candidate policy set (directories or files) to decide
	// with instead of the configuration's own, on the configuration's
	// agents, identity and facts; the own set's decision is then Live, for
	// comparison. No running writ is asked or changed.
	Policies []string
}

// EvalResult is what Eval found: the fault the protocol's parser answers,
// or the policy input and the decision. It is what `writ eval` prints.
type EvalResult struct {
	Input *authz.Input `json:"input"`
	// Decision is the decision of the candidate set when EvalRequest
	// names one, else the configuration's own set's.
	Decision EvalDecision `json:"decision"`
	// Live is the configuration's own set's decision beside a candidate's
	// (nil without one, or when LiveErr says why there is none).
	Live    *EvalDecision `json:"live,omitempty"`
	Explain []authz.Fired `json:"explain,omitempty"`
	// Identity says why the credentials were refused (the caller is then
	// anonymous).
	Identity string      `json:"identity_error,omitempty"`
	Fault    *task.Fault `json:"fault,omitempty"`
	// LiveErr says why the configuration's own set could not be compared
	// with a candidate (it does not load: an edit in place that a running
	// writ refused); the candidate is still decided. ExplainErr is
	// explaining's failure.
	LiveErr    error `json:"-"`
	ExplainErr error `json:"-"`
}

// EvalDecision is the decision as `writ eval` prints it.
type EvalDecision struct {
	Allow    bool          `json:"allow"`
	Denials  []task.Denial `json:"denials"`
	Revision string        `json:"revision"`
	// Err is the policy's failure on the request: the decision is then a
	// denial, as writ makes it (fail closed).
	Err error `json:"-"`
}

// Eval decides one request as writ serve would with cfg: routed to its
// agent, parsed by the protocol's adapter, its caller identified by the
// configured sources, the input built and the policy asked (no cache, no
// known-request check: a policy that fails shows its error in the
// decision's Err). With a candidate set (EvalRequest.Policies) the
// candidate decides, and the configuration's own set's decision is Live.
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
	out.Input = authz.BuildInput(&authz.Facts{Request: &req, Caller: caller, Target: authz.TargetOf(agent),
		HTTP:                  authz.HTTPInfo{Method: in.Method, Path: fullPath, Host: in.Header.Get("Host")},
		DefaultClassification: cfg.DefaultClassification})
	p, err := evalPolicy(ctx, cfg, r.Policies, out)
	if err != nil {
		return nil, err
	}
	if out.Decision, err = evalDecide(ctx, p, out.Input); err != nil {
		return nil, err
	}
	if r.Explain {
		out.Explain, out.ExplainErr = p.Explain(ctx, out.Input)
	}
	return out, nil
}

// evalPolicy is the policy set Eval decides with: the candidate when there
// is one (with the configuration's own set's decision on out.Input as
// out.Live), else the configuration's own. It has the configuration's
// facts, but no known requests: a policy that fails shows its error in the
// decision.
func evalPolicy(ctx context.Context, cfg *config.Config, candidate []string, out *EvalResult) (*authz.Policy, error) {
	opt := authz.LoadOptions{Facts: cfg.PolicyFacts()}
	if len(candidate) == 0 {
		return loadPolicy(ctx, cfg, opt)
	}
	p, err := authz.LoadPolicy(ctx, candidate, opt)
	if err != nil {
		return nil, fmt.Errorf("the candidate policies %s: %w", strings.Join(candidate, ","), err)
	}
	// The live set is only compared with: one that does not load (an edit
	// in place that the running writ refused) is said, not fatal.
	live, err := loadPolicy(ctx, cfg, opt)
	if err == nil {
		var d EvalDecision
		if d, err = evalDecide(ctx, live, out.Input); err == nil {
			out.Live = &d
		}
	}
	if err != nil {
		out.LiveErr = fmt.Errorf("the configuration's own policies, for comparison: %w", err)
	}
	return p, nil
}

// evalDecide is p's decision on input, by an engine of its own (no cache).
// A decision that errors is a denial, as writ makes it (fail closed), with
// the error in Err; an error means p could not decide at all.
func evalDecide(ctx context.Context, p *authz.Policy, input *authz.Input) (EvalDecision, error) {
	engine, err := authz.NewEngine(p, authz.Options{CacheSize: -1})
	if err != nil {
		return EvalDecision{}, err
	}
	d, err := engine.Decide(ctx, input)
	out := EvalDecision{Allow: d.Allow, Denials: d.Denials, Revision: d.Revision, Err: err}
	if out.Denials == nil {
		out.Denials = []task.Denial{}
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
