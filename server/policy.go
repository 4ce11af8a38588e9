package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/examples"
	"github.com/writ-authz/writ/adapters/names"
	"github.com/writ-authz/writ/adapters/wire"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/policies"
	"github.com/writ-authz/writ/proxy/authzen"
	"github.com/writ-authz/writ/task"
)

// embeddedName names the shipped policies embedded in the binary in
// Policy.Files, logs and errors.
const embeddedName = "embedded"

// loadPolicy loads cfg's policy set: the files under policies:, or, when the
// key is not set, the shipped policies embedded in the binary (so writ runs
// from any directory).
func loadPolicy(ctx context.Context, cfg *config.Config, opt authz.LoadOptions) (*authz.Policy, error) {
	if cfg.EmbeddedPolicies() {
		return authz.LoadPolicyFS(ctx, policies.FS, embeddedName, opt)
	}
	if cfg.PolicyBundle != nil {
		return loadPersistedBundle(ctx, cfg, opt)
	}
	p, err := authz.LoadPolicy(ctx, cfg.Policies, opt)
	if err != nil {
		return nil, fmt.Errorf("policies %v: %w", cfg.Policies, err)
	}
	return p, nil
}

// errNoPersistedBundle: a command outside a serving writ has no bundle
// policy to read.
var errNoPersistedBundle = errors.New("no bundle persisted in persist_dir to check here: the policy comes from the bundle service when writ serves")

// loadPersistedBundle loads the bundle policy_bundle persisted (what a
// command that runs outside a serving writ can read of a bundle's policy).
func loadPersistedBundle(ctx context.Context, cfg *config.Config, opt authz.LoadOptions) (*authz.Policy, error) {
	return loadPersisted(ctx, "policy_bundle", cfg.PolicyBundle, opt)
}

// loadPersisted loads the bundle the set under key (b its configuration)
// persisted.
func loadPersisted(ctx context.Context, key string, b *config.PolicyBundle, opt authz.LoadOptions) (*authz.Policy, error) {
	src, err := newBundleSource(key, b, nil)
	if err != nil {
		return nil, err
	}
	ok, err := src.readPersisted()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNoPersistedBundle
	}
	return src.load(ctx, opt)
}

// shadowKey is the key cfg's shadow set comes from: policies_shadow,
// policy_bundle_shadow, or "" without a shadow.
func shadowKey(cfg *config.Config) string {
	switch {
	case cfg.PolicyBundleShadow != nil:
		return "policy_bundle_shadow"
	case len(cfg.PoliciesShadow) > 0:
		return "policies_shadow"
	}
	return ""
}

// loadShadow loads cfg's shadow set as a command outside a serving writ
// reads it (a bundle's: the one persisted); nil without a shadow.
func loadShadow(ctx context.Context, cfg *config.Config, opt authz.LoadOptions) (*authz.Policy, error) {
	switch shadowKey(cfg) {
	case "policy_bundle_shadow":
		return loadPersisted(ctx, "policy_bundle_shadow", cfg.PolicyBundleShadow, opt)
	case "policies_shadow":
		p, err := authz.LoadPolicy(ctx, cfg.PoliciesShadow, opt)
		if err != nil {
			return nil, fmt.Errorf("policies_shadow %v: %w", cfg.PoliciesShadow, err)
		}
		return p, nil
	}
	return nil, nil
}

// shadowSource says where cfg's shadow set comes from ("" without one).
func shadowSource(cfg *config.Config) string {
	switch shadowKey(cfg) {
	case "policy_bundle_shadow":
		return bundleSourceDesc(cfg.PolicyBundleShadow)
	case "policies_shadow":
		return strings.Join(cfg.PoliciesShadow, ", ")
	}
	return ""
}

// policySource says where cfg's policies come from, for logs and messages.
func policySource(cfg *config.Config) string {
	if cfg.EmbeddedPolicies() {
		return "the shipped policies embedded in writ"
	}
	if cfg.PolicyBundle != nil {
		return bundleSourceDesc(cfg.PolicyBundle)
	}
	return strings.Join(cfg.Policies, ", ")
}

// policyOptions are the load options of cfg's policy set: the configuration's
// facts (agents[].callback_hosts, tenants) merged into the policy data, and
// the known requests the set must decide without an error (known).
func policyOptions(cfg *config.Config) (authz.LoadOptions, error) {
	smoke, err := known(cfg)
	if err != nil {
		return authz.LoadOptions{}, err
	}
	// The AuthZEN applications' decisions must be in every set that loads.
	return authz.LoadOptions{Facts: cfg.PolicyFacts(), Smoke: smoke, Rules: authzen.RequiredRules(cfg)}, nil
}

// representative is the request writ evaluates to know a policy set works:
// the A2A 1.0 send of adapters/examples (a2a-1.0-send), parsed as writ
// parses it.
func representative() (task.Request, wire.Inbound, error) {
	raw, err := examples.Read("a2a-1.0-send")
	if err != nil {
		return task.Request{}, wire.Inbound{}, err
	}
	lim := wire.Limits{MaxBodyBytes: wire.DefaultMaxBodyBytes, MaxJSONDepth: wire.DefaultMaxJSONDepth}
	in, err := wire.ReadExample(raw, lim.MaxBodyBytes)
	if err != nil {
		return task.Request{}, wire.Inbound{}, fmt.Errorf("the representative request: %w", err)
	}
	edges, err := adapters.NewRoute(names.Auto, "/") // a route of the default protocol: the example is A2A's send
	if err != nil {
		return task.Request{}, wire.Inbound{}, err
	}
	req, fault := edges.For(in.Path).Parse(in, lim)
	if fault != nil {
		return task.Request{}, wire.Inbound{}, fmt.Errorf("the representative request: %w", fault)
	}
	return req, in, nil
}

// representativeInput is the policy input of the representative request to
// agent a from a caller of a's first tenant who authenticated by method.
func representativeInput(cfg *config.Config, a *config.Agent, req *task.Request, in wire.Inbound, method string) *authz.Input {
	tenant := "tenant"
	if len(a.Tenants) > 0 {
		tenant = a.Tenants[0]
	}
	caller := identity.Caller{Authenticated: true, Method: method, AgentID: "validate-caller", UserID: "validate-user",
		Tenant: tenant, Scopes: []string{}}
	return authz.BuildInput(&authz.Facts{Request: req, Caller: caller, Target: authz.TargetOf(a),
		HTTP: authz.HTTPInfo{Method: in.Method, Path: in.Path}, DefaultClassification: cfg.DefaultClassification})
}

// callerMethodNames are the ways a caller can authenticate, in the order
// writ validate reports them.
var callerMethodNames = []string{identity.MethodJWT, identity.MethodMTLS, identity.MethodStatic}

// known are the known requests of policyOptions: the representative request
// to every configured agent, from a caller of each way of authenticating.
func known(cfg *config.Config) ([]authz.Smoke, error) {
	req, in, err := representative()
	if err != nil {
		return nil, err
	}
	var out []authz.Smoke
	for i := range cfg.Agents {
		a := &cfg.Agents[i]
		for _, m := range callerMethodNames {
			out = append(out, authz.Smoke{Name: fmt.Sprintf("a send to %s from a %s caller", a.Name, m),
				Input: representativeInput(cfg, a, &req, in, m)})
		}
	}
	return out, nil
}

// ReloadCheck is what CheckReload found of a policy set.
type ReloadCheck struct {
	// Source names the set checked: the candidate's paths, or where the
	// configuration's own policies come from.
	Source string
	// Refused says why a reload would refuse the set; nil when it passes.
	Refused error
	// Revision is the revision the set would serve ("" when refused), and
	// Known the number of known requests it decided.
	Revision string
	Known    int
	// Candidate says the set is not the configuration's own; LiveSource and
	// LiveRevision are then the own set's, for comparison (LiveErr when it
	// does not load: the same revision is the same content, wherever the
	// files live).
	Candidate    bool
	LiveSource   string
	LiveRevision string
	LiveErr      error
}

// CheckReload loads the set under candidate (none: cfg's own policies) as
// a reload of the writ running cfg would: with the configuration's facts,
// the AuthZEN applications' rules and the known requests, but not the set's
// own Rego tests (`writ policy test` runs them first). An error means the
// check could not be made; a set that fails it is Refused.
func CheckReload(ctx context.Context, cfg *config.Config, candidate []string) (*ReloadCheck, error) {
	opt, err := policyOptions(cfg)
	if err != nil {
		return nil, err
	}
	opt.SkipTests = true
	c := &ReloadCheck{Source: policySource(cfg), Known: len(opt.Smoke), Candidate: len(candidate) > 0}
	live, liveErr := loadPolicy(ctx, cfg, opt)
	p := live
	if c.Candidate {
		c.LiveSource, c.LiveErr = c.Source, liveErr
		if liveErr == nil {
			c.LiveRevision = live.Revision
		}
		c.Source = strings.Join(candidate, ", ")
		p, err = authz.LoadPolicy(ctx, candidate, opt)
	} else {
		err = liveErr
	}
	if err != nil {
		c.Refused = err
		return c, nil //nolint:nilerr // a refused set is the check's finding, not its failure
	}
	c.Revision = p.Revision
	return c, nil
}

// PolicyTests are the results of a policy set's own Rego tests.
type PolicyTests struct {
	Results []authz.TestResult
	Summary authz.TestSummary
	// Embedded says the set tested is the shipped one embedded in writ.
	Embedded bool
}

// TestPolicySet runs the Rego tests of the set under paths; without paths,
// of cfg's own policies (cfg may be nil), else of ./policies when it exists
// and no configuration is given, else of the shipped policies embedded in
// writ. Tests that fail are in the results; an error means they could not
// run.
func TestPolicySet(ctx context.Context, cfg *config.Config, paths []string) (*PolicyTests, error) {
	out := &PolicyTests{}
	if len(paths) == 0 {
		switch st, err := os.Stat("policies"); {
		case cfg != nil && cfg.PolicyBundle != nil:
			return nil, errors.New("the policy comes from policy_bundle: name the bundle's files to test (writ policy test <dir>), or run opa test on them")
		case cfg != nil && !cfg.EmbeddedPolicies():
			paths = cfg.Policies
		case cfg == nil && err == nil && st.IsDir():
			paths = []string{"policies"}
		default:
			// The tests run on files: the embedded set, copied out.
			dir, err := os.MkdirTemp("", "writ-policies-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			if err := os.CopyFS(dir, policies.FS); err != nil {
				return nil, err
			}
			paths, out.Embedded = []string{dir}, true
		}
	}
	var err error
	out.Results, out.Summary, err = authz.TestPolicies(ctx, paths)
	if err != nil && !errors.Is(err, authz.ErrPolicyTests) {
		return nil, err
	}
	return out, nil
}
