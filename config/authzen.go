package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
)

// AuthZEN runs writ as an OpenID AuthZEN 1.0 policy decision point on a
// listener of its own (docs/authzen.md): any policy enforcement point asks
// it for decisions, delegation decisions included (the delegation profile,
// docs/authzen-profile.md), and other Rego packages of the policy set serve
// other applications. Off unless listen is set.
type AuthZEN struct {
	// Listen is the PDP's address; empty is off.
	Listen string `yaml:"listen"`
	// TLS makes the listener serve HTTPS (same keys as tls:); with
	// client_ca_file, enforcement points may authenticate by mTLS (their
	// certificate's SPIFFE ID through identity.mtls).
	TLS *TLS `yaml:"tls"`
	// PublicURL is the PDP's identifier, its policy_decision_point: the base
	// URL enforcement points reach it at (https, no query or fragment).
	// Default: http(s)://listen.
	PublicURL string `yaml:"public_url"`
	// Clients are the callers allowed to ask, by agent id (a JWT's agent,
	// an mTLS SPIFFE ID's mapping, a static token's agent_id): every
	// enforcement point authenticates through the identity sources, and one
	// not listed is refused (403). Required: a PDP that answers anyone
	// lets anyone probe its policies.
	Clients []string `yaml:"clients"`
	// MaxEvaluations bounds the evaluations of one batch request (default
	// DefaultAuthZENMaxEvaluations, at most MaxAuthZENEvaluations); a batch
	// over it is refused (400).
	MaxEvaluations int `yaml:"max_evaluations"`
	// PageSize is the most results a search answers in one page (default
	// DefaultAuthZENPageSize, at most MaxAuthZENPageSize); a request's
	// page.limit may ask for fewer.
	PageSize int `yaml:"page_size"`
	// MaxSearchCandidates bounds the candidates one search evaluates
	// (default DefaultAuthZENSearchCandidates, at most
	// MaxAuthZENSearchCandidates): each is one decision, so the bound is what
	// one search may cost. A search with more fails (500), never truncates.
	MaxSearchCandidates int `yaml:"max_search_candidates"`
	// Delegation is the delegation profile, served at the root.
	Delegation AuthZENDelegation `yaml:"delegation"`
	// Applications are other Rego packages of the policy set, each served as
	// a PDP of its own under /<name>.
	Applications []AuthZENApplication `yaml:"applications"`
}

// AuthZENDelegation configures the delegation profile: AuthZEN's subject,
// action, resource and context mapped onto writ/v1 and decided by the
// admission core, as the sidecar decides (docs/authzen-profile.md).
type AuthZENDelegation struct {
	// Disabled turns the profile off: the root then answers 404.
	Disabled bool `yaml:"disabled"`
	// TrustSubjectProperties takes the caller from the subject's properties
	// (agent id, tenant, scopes, chain, ...) when the subject carries no
	// token: for an enforcement point that verified the caller itself. Off
	// (the default), a subject without a token is anonymous, as a request
	// without credentials is.
	TrustSubjectProperties bool `yaml:"trust_subject_properties"`
}

// AuthZENApplication is one Rego package served as an AuthZEN PDP: its
// decision rule answers evaluations, its candidate rules searches
// (docs/authzen.md).
type AuthZENApplication struct {
	// Name is the application's path segment: it is served under /<name>
	// (/<name>/access/v1/evaluation, /.well-known/authzen-configuration/<name>).
	Name string `yaml:"name"`
	// Package is the Rego package (todo, acme.records.authz): its decision
	// is data.<package>.decision, its search candidates data.<package>.subjects,
	// .resources and .actions.
	Package string `yaml:"package"`
}

// The AuthZEN bounds: defaults and ceilings.
const (
	DefaultAuthZENMaxEvaluations   = 100
	MaxAuthZENEvaluations          = 1000
	DefaultAuthZENPageSize         = 100
	MaxAuthZENPageSize             = 1000
	DefaultAuthZENSearchCandidates = 1000
	MaxAuthZENSearchCandidates     = 10000
)

// Enabled reports whether the AuthZEN listener is configured.
func (a *AuthZEN) Enabled() bool { return a.Listen != "" }

var (
	appName    = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	regoPkg    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	reservedAp = map[string]bool{"access": true, ".well-known": true}
)

// PackageRef is the data reference of an application's package
// (data.<package>), "data." accepted in front.
func (a AuthZENApplication) PackageRef() string {
	return "data." + strings.TrimPrefix(a.Package, "data.")
}

func (a *AuthZEN) applyDefaults() {
	if a.MaxEvaluations == 0 {
		a.MaxEvaluations = DefaultAuthZENMaxEvaluations
	}
	if a.PageSize == 0 {
		a.PageSize = DefaultAuthZENPageSize
	}
	if a.MaxSearchCandidates == 0 {
		a.MaxSearchCandidates = DefaultAuthZENSearchCandidates
	}
}

func (a *AuthZEN) validate(c *Config, bad func(key, format string, args ...any)) {
	if !a.Enabled() {
		return
	}
	if _, port, err := net.SplitHostPort(a.Listen); err != nil {
		bad("authzen.listen", "%q is not host:port", a.Listen)
	} else if port != "0" {
		for key, other := range map[string]string{"listen": c.Listen, "admin": c.Admin, "envoy.grpc_listen": c.Envoy.GRPCListen,
			"envoy.http_listen": c.Envoy.HTTPListen, "envoy.ext_proc_listen": c.Envoy.ExtProcListen, "egress.listen": c.Egress.Listen} {
			if other == a.Listen {
				bad("authzen.listen", "%q is already %s", a.Listen, key)
			}
		}
	}
	if a.TLS != nil {
		a.TLS.validateAt("authzen.tls", bad)
	}
	if a.PublicURL != "" {
		u, err := url.Parse(a.PublicURL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			bad("authzen.public_url", "must be an http(s) URL, got %q", a.PublicURL)
		case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Path, "/"):
			bad("authzen.public_url", "%q: the PDP's identifier has no query, fragment or trailing slash", a.PublicURL)
		}
	}
	if len(a.Clients) == 0 {
		bad("authzen.clients", "required: the agent ids of the enforcement points allowed to ask (a PDP that answers anyone lets anyone probe its policies)")
	}
	for i, id := range a.Clients {
		if strings.TrimSpace(id) == "" || strings.TrimSpace(id) != id {
			bad(fmt.Sprintf("authzen.clients[%d]", i), "must be an agent id, not %q", id)
		}
	}
	bound := func(key string, v, ceiling, def int) {
		if v < 1 || v > ceiling {
			bad(key, "must be from 1 to %d (0: the default, %d), not %d", ceiling, def, v)
		}
	}
	bound("authzen.max_evaluations", a.MaxEvaluations, MaxAuthZENEvaluations, DefaultAuthZENMaxEvaluations)
	bound("authzen.page_size", a.PageSize, MaxAuthZENPageSize, DefaultAuthZENPageSize)
	bound("authzen.max_search_candidates", a.MaxSearchCandidates, MaxAuthZENSearchCandidates, DefaultAuthZENSearchCandidates)
	names := map[string]bool{}
	for i, app := range a.Applications {
		key := fmt.Sprintf("authzen.applications[%d]", i)
		switch {
		case !appName.MatchString(app.Name) || reservedAp[app.Name]:
			bad(key+".name", "%q is not a path segment of lower-case letters, digits, - and _ (nor access)", app.Name)
		case names[app.Name]:
			bad(key+".name", "%q is used twice", app.Name)
		}
		names[app.Name] = true
		pkg := strings.TrimPrefix(app.Package, "data.")
		switch {
		case !regoPkg.MatchString(pkg):
			bad(key+".package", "%q is not a Rego package path (todo, acme.records.authz)", app.Package)
		case pkg == "writ" || strings.HasPrefix(pkg, "writ."):
			bad(key+".package", "%q is writ's own: delegation decisions are the delegation profile's (authzen.delegation)", app.Package)
		}
	}
	if a.Delegation.Disabled && len(a.Applications) == 0 {
		bad("authzen.delegation.disabled", "with no applications the PDP would answer nothing")
	}
}
