package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/writ-authz/writ/adapters/names"
	"github.com/writ-authz/writ/task"
)

// Egress is egress mode (docs/egress.md): a listener where the protected
// agent sends its own outbound calls, which writ decides with the same
// policies (input.direction "egress"), forwards with a token obtained by
// RFC 8693 token exchange (Exchange), and logs with the chain of custody.
// Off unless Listen is set.
type Egress struct {
	// Listen is the egress listener's address; empty is off. It must be a
	// loopback address unless AllowRemote is set: only the local agent may
	// reach it.
	Listen string `yaml:"listen"`
	// AllowRemote lets Listen be a non-loopback address (writ warns): anyone
	// who reaches the listener and knows a forwarded decision's id acts with
	// that request's authority.
	AllowRemote bool `yaml:"allow_remote"`
	// Agent is the protected agent (agents[].name) whose calls the listener
	// takes: the caller of every egress decision, and the actor the STS names
	// in the outbound token (its client_id, or its JWT-SVID's sub, must be
	// this name). Default: the only agent, when there is one.
	Agent string `yaml:"agent"`
	// LinkTTL bounds how long an inbound request can be named as the parent
	// of the agent's outbound calls (Writ-Parent), and never beyond the
	// inbound token's exp (default 1h).
	LinkTTL time.Duration `yaml:"link_ttl"`
	// MaxLinkBytes bounds the memory the links take (default 16 MiB), and
	// MaxLinkBytesPerCaller what one inbound caller's links may take of it
	// (default an eighth): one caller's flood cannot evict everyone's links.
	MaxLinkBytes          int `yaml:"max_link_bytes"`
	MaxLinkBytesPerCaller int `yaml:"max_link_bytes_per_caller"`
	// TrustedHosts are target hosts that may resolve to private or loopback
	// addresses and be reached over http (every other target host is checked
	// at dial time, like push callbacks). Keep it short.
	TrustedHosts []string `yaml:"trusted_hosts"`
	// Targets are the remote agents the local agent may call, by name
	// (/to/{name}/...).
	Targets []EgressTarget `yaml:"targets"`
	// Exchange is how the outbound token is obtained (package authz/exchange).
	Exchange Exchange `yaml:"exchange"`
}

// EgressTarget is one remote agent the local agent may call. Its platform
// metadata has the fields of agents[], so the policy's input.target has the
// same shape on egress as on ingress.
type EgressTarget struct {
	// Name identifies the agent to policies (input.target.name) and in the
	// path the local agent calls (/to/{name}/...): the name its own writ
	// protects it under.
	Name string `yaml:"name"`
	// Upstream is the agent's base URL (its writ's public URL). Optional
	// with CardURL: the card's first interface is then the base URL.
	Upstream string `yaml:"upstream"`
	// CardURL is the URL of the agent's card, and a second name of the
	// target on the listener (/card/{the URL, escaped}/...). Its card is
	// fetched there (by the agent's calls for it, and to find the base URL
	// when Upstream is not set) with the ingress card-fetch rules, through
	// the egress SSRF guard, with the call's outbound token.
	CardURL string `yaml:"card_url"`
	// RequireSignedCard refuses the agent's card, and every call that needs
	// it, unless a signature on it verifies (with CardKeys, or the key set
	// its jku names, fetched under cards.jku_trusted_hosts' rules). Off, the
	// card's signatures are not checked on egress: the agent reads the card
	// from its own writ, which rewrites it.
	RequireSignedCard bool `yaml:"require_signed_card"`
	// CardKeys is a JWKS file: the only keys the agent's card may be signed
	// with (its jku is then never fetched). It turns the check on too.
	CardKeys string `yaml:"card_keys" writ:"path"`
	// Protocol, JSONRPCPath, Owner, Tenants, MaxDataClassification,
	// SecuritySchemes and Skills are as agents[] has them.
	Protocol              string       `yaml:"protocol"`
	JSONRPCPath           string       `yaml:"jsonrpc_path"`
	Owner                 string       `yaml:"owner"`
	Tenants               []string     `yaml:"tenants"`
	MaxDataClassification task.Level   `yaml:"max_data_classification"`
	SecuritySchemes       []string     `yaml:"security_schemes"`
	Skills                []task.Skill `yaml:"skills"`
	// Audience is the audience the outbound token is asked for (default
	// egress.exchange.audience_format with the name: agent:<name>).
	Audience string `yaml:"audience"`
	// Scopes, when set, are the scopes asked for on every call to this target
	// (those the caller holds). Default: the scopes the operation requires
	// (data.writ.config.required_scopes), and for an operation that requires
	// none those a send requires.
	Scopes []string `yaml:"scopes"`
}

// Enabled reports whether egress mode is on.
func (e *Egress) Enabled() bool { return e.Listen != "" }

// Target returns the target named name.
func (e *Egress) Target(name string) (*EgressTarget, bool) {
	for i := range e.Targets {
		if e.Targets[i].Name == name {
			return &e.Targets[i], true
		}
	}
	return nil, false
}

// AsAgent is the target as an agent entry: what the policy input and the
// protocol table read.
func (t *EgressTarget) AsAgent() Agent {
	return Agent{Name: t.Name, Route: "/", Upstream: t.Upstream, Protocol: t.Protocol, JSONRPCPath: t.JSONRPCPath,
		Owner: t.Owner, Tenants: t.Tenants, MaxDataClassification: t.MaxDataClassification,
		SecuritySchemes: t.SecuritySchemes, Skills: t.Skills, RequireSignedCard: t.RequireSignedCard, CardKeys: t.CardKeys}
}

// TargetByCard returns the target whose card_url is cardURL, exactly.
func (e *Egress) TargetByCard(cardURL string) (*EgressTarget, bool) {
	for i := range e.Targets {
		if e.Targets[i].CardURL != "" && e.Targets[i].CardURL == cardURL {
			return &e.Targets[i], true
		}
	}
	return nil, false
}

// Defaults of egress mode.
const (
	DefaultLinkTTL      = time.Hour
	DefaultMaxLinkBytes = 16 << 20
	maxLinkTTL          = 24 * time.Hour
	minLinkShare        = 16 << 10 // a few links: any smaller and one request's could not be kept
)

func (e *Egress) applyDefaults(agents []Agent) {
	if !e.Enabled() {
		return
	}
	if e.Agent == "" && len(agents) == 1 {
		e.Agent = agents[0].Name
	}
	if e.LinkTTL == 0 {
		e.LinkTTL = DefaultLinkTTL
	}
	if e.MaxLinkBytes == 0 {
		e.MaxLinkBytes = DefaultMaxLinkBytes
	}
	if e.MaxLinkBytesPerCaller == 0 {
		e.MaxLinkBytesPerCaller = max(minLinkShare, e.MaxLinkBytes/8)
	}
	e.Exchange.ApplyDefaults()
	for i := range e.Targets {
		t := &e.Targets[i]
		if t.Protocol == "" {
			t.Protocol = names.Auto
		}
		if t.JSONRPCPath == "" {
			t.JSONRPCPath = "/"
		}
		if t.Audience == "" && t.Name != "" {
			t.Audience = e.Exchange.Audience(t.Name)
		}
	}
}

// validate checks egress mode when it is on: every key, and the exchange
// block under egress.exchange.
func (e *Egress) validate(c *Config, bad func(key, format string, args ...any)) {
	if !e.Enabled() {
		return
	}
	if host, _, err := net.SplitHostPort(e.Listen); err != nil {
		bad("egress.listen", "%q is not host:port", e.Listen)
	} else if !loopbackHost(host) && !e.AllowRemote {
		bad("egress.listen", "%q is not a loopback address: only the local agent may reach the egress listener (set egress.allow_remote to bind it elsewhere)", e.Listen)
	} else if !strings.HasSuffix(e.Listen, ":0") && (e.Listen == c.Listen || e.Listen == c.Admin) {
		bad("egress.listen", "%q is already the listen or admin address", e.Listen)
	}
	switch _, ok := c.Agent(e.Agent); {
	case e.Agent == "":
		bad("egress.agent", "required when more than one agent is configured: the agent whose calls the egress listener takes")
	case !ok:
		bad("egress.agent", "%q is not one of agents[]", e.Agent)
	}
	if e.LinkTTL < 0 || e.LinkTTL > maxLinkTTL {
		bad("egress.link_ttl", "must be from 0 (the default, %s) to %s, not %s", DefaultLinkTTL, maxLinkTTL, e.LinkTTL)
	}
	if e.MaxLinkBytes < 0 {
		bad("egress.max_link_bytes", "must be positive (0: the default, %d), not %d", DefaultMaxLinkBytes, e.MaxLinkBytes)
	} else if e.MaxLinkBytesPerCaller <= 0 || e.MaxLinkBytesPerCaller > e.MaxLinkBytes {
		bad("egress.max_link_bytes_per_caller", "must be positive and at most max_link_bytes (%d), not %d", e.MaxLinkBytes, e.MaxLinkBytesPerCaller)
	}
	for i, h := range e.TrustedHosts {
		if h == "" || strings.ContainsAny(h, "/@ :") && net.ParseIP(h) == nil {
			bad(fmt.Sprintf("egress.trusted_hosts[%d]", i), "must be a host name or an IP address, not %q", h)
		}
	}
	if len(e.Targets) == 0 {
		bad("egress.targets", "at least one target is required: the agents the local agent may call")
	}
	seen, seenCards := map[string]bool{}, map[string]bool{}
	for i := range e.Targets {
		key := fmt.Sprintf("egress.targets[%d]", i)
		t := &e.Targets[i]
		t.validate(key, seen, seenCards, bad)
		// Where every call (upstream) or the card fetch (card_url) goes:
		// refused at load when the egress SSRF guard would refuse it on
		// every call, so the mistake shows at writ validate.
		for _, u := range []struct{ key, url string }{{key + ".upstream", t.Upstream}, {key + ".card_url", t.CardURL}} {
			if u.url == "" || !plainHTTPURL(u.url) {
				continue // required or malformed: said by validate
			}
			if why := e.unreachable(u.url); why != "" {
				bad(u.key, "%q: %s: the egress SSRF guard refuses it unless egress.trusted_hosts names the host", u.url, why)
			}
		}
	}
	e.Exchange.validate(bad)
}

// validate checks one target.
func (t *EgressTarget) validate(key string, seen, seenCards map[string]bool, bad func(key, format string, args ...any)) {
	switch {
	case t.Name == "":
		bad(key+".name", "required")
	case seen[t.Name]:
		bad(key+".name", "%q is used twice", t.Name)
	case strings.ContainsAny(t.Name, "/%?#\\") || strings.TrimSpace(t.Name) != t.Name || t.Name == "." || t.Name == "..":
		// The name is a path segment of /to/{name}/...: it must read alike
		// to every router.
		bad(key+".name", "%q: a target's name is a plain path segment: no /, %%, ?, #, \\, surrounding spaces, nor . or ..", t.Name)
	}
	seen[t.Name] = true
	switch {
	case t.Upstream == "" && t.CardURL == "":
		bad(key+".upstream", "required (or card_url): where the agent is")
	case t.Upstream != "" && !plainHTTPURL(t.Upstream):
		bad(key+".upstream", "must be an http(s) URL without user info, got %q", t.Upstream)
	}
	if t.CardURL != "" {
		if u, err := url.Parse(t.CardURL); err != nil || !plainHTTPURL(t.CardURL) || u.Fragment != "" || u.RawQuery != "" || u.Path == "" || u.Path == "/" {
			bad(key+".card_url", "must be the http(s) URL of a card (a path, no user info, query or fragment), got %q", t.CardURL)
		} else if seenCards[t.CardURL] {
			bad(key+".card_url", "%q is used twice", t.CardURL)
		}
		seenCards[t.CardURL] = true
	}
	if t.CardKeys != "" && strings.TrimSpace(t.CardKeys) != t.CardKeys {
		bad(key+".card_keys", "%q: must name a JWKS file, without surrounding spaces", t.CardKeys)
	}
	if t.Protocol != names.Auto && !names.Known(t.Protocol) {
		bad(key+".protocol", "must be %s, not %q", names.Choices(), t.Protocol)
	}
	if !strings.HasPrefix(t.JSONRPCPath, "/") {
		bad(key+".jsonrpc_path", "must start with /")
	}
	if t.MaxDataClassification == "" {
		bad(key+".max_data_classification", "required (public, internal, confidential or restricted)")
	} else if t.MaxDataClassification.Rank() < 0 {
		bad(key+".max_data_classification", "unknown level %q", t.MaxDataClassification)
	}
	if len(t.SecuritySchemes) == 0 {
		bad(key+".security_schemes", "required: the auth scheme kinds the agent accepts")
	}
	for j, s := range t.SecuritySchemes {
		switch task.SchemeKind(s) {
		case task.SchemeAPIKey, task.SchemeHTTP, task.SchemeOAuth2, task.SchemeOIDC, task.SchemeMTLS:
		default:
			bad(fmt.Sprintf("%s.security_schemes[%d]", key, j), "unknown scheme kind %q (apikey, http, oauth2, openidconnect, mtls)", s)
		}
	}
	if t.Audience == "" || strings.ContainsAny(t.Audience, " \t\r\n") {
		bad(key+".audience", "must be a non-empty audience without spaces, not %q", t.Audience)
	}
	for j, s := range t.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			bad(fmt.Sprintf("%s.scopes[%d]", key, j), "must be one scope value (no spaces, quotes or backslashes), not %q", s)
		}
	}
}

// unreachable says why the egress SSRF guard refuses every call to raw (an
// http(s) URL) without looking up a name: plain http, or a host that is an
// IP literal of a loopback, private, link-local, unspecified or multicast
// address, unless egress.trusted_hosts names the host. "" when it may be
// reached; a name is checked by the guard where it dials, on each call.
func (e *Egress) unreachable(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "not a URL"
	}
	host := u.Hostname()
	for _, h := range e.TrustedHosts {
		if sameHost(h, host) {
			return ""
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		switch {
		case a.IsLoopback():
			return "a loopback address"
		case a.IsPrivate():
			return "a private address"
		case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
			return "a link-local address"
		case a.IsUnspecified():
			return "the unspecified address"
		case a.IsMulticast():
			return "a multicast address"
		}
	}
	if u.Scheme == "http" {
		return "plain http"
	}
	return ""
}

// sameHost reports whether a trusted_hosts entry names host, in the form the
// guard matches them: an IP literal by its address, a name in any case,
// without a trailing dot.
func sameHost(trusted, host string) bool {
	norm := func(h string) string {
		h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
		if a, err := netip.ParseAddr(h); err == nil {
			return a.String()
		}
		return strings.ToLower(h)
	}
	return norm(trusted) == norm(host)
}

// plainHTTPURL reports whether raw is an absolute http(s) URL with a host and
// no user info.
func plainHTTPURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

// loopbackHost reports whether a listener host is loopback only: a loopback
// IP or localhost (an empty host is every address).
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
