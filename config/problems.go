package config

import (
	"fmt"
	"net"
	"reflect"
	"sort"
	"strings"
)

// Problem is one thing wrong (or, as a warning, doubtful) in a configuration:
// the key path it is about (agents[0].upstream), the line of the file where
// that key is (0 when the key is not in the file, e.g. a required one that is
// missing and has no parent in it either) and what is wrong, in the file's
// own words: never a Go type.
type Problem struct {
	Key  string
	Line int
	Msg  string
}

func (p Problem) String() string {
	s := p.Msg
	if p.Key != "" {
		s = p.Key + ": " + s
	}
	if p.Line > 0 {
		s = fmt.Sprintf("line %d: %s", p.Line, s)
	}
	return s
}

// Problems is a configuration's problems, one per line when printed. File,
// when set (Load sets it), starts each line as a compiler's would:
// writ.yaml:7: agents[0].upstream: must be an http(s) URL.
type Problems struct {
	File string
	List []Problem
}

func (ps *Problems) Error() string {
	lines := make([]string, len(ps.List))
	for i, p := range ps.List {
		switch {
		case ps.File != "" && p.Line > 0:
			lines[i] = fmt.Sprintf("%s:%d: %s", ps.File, p.Line, Problem{Key: p.Key, Msg: p.Msg})
		case ps.File != "":
			lines[i] = ps.File + ": " + p.String()
		default:
			lines[i] = p.String()
		}
	}
	return strings.Join(lines, "\n")
}

// positions maps a key path (agents[0].upstream) to the line it is on.
type positions map[string]int

// line is the line of key, else of its nearest parent in the file (the
// agent a missing required key belongs to), else 0.
func (pos positions) line(key string) int {
	for key != "" {
		if l, ok := pos[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

// problems collects Problems with the lines of their keys.
type problems struct {
	pos  positions
	list []Problem
	// root is the type of the document being read (Config, STS): where an
	// unknown key's hint looks for a key of that name.
	root reflect.Type
}

func (ps *problems) add(key, format string, args ...any) {
	ps.list = append(ps.list, Problem{Key: key, Line: ps.pos.line(key), Msg: fmt.Sprintf(format, args...)})
}

// err is the problems in the file's order (those with no line last), or nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sorted(ps.list)
	return &Problems{List: ps.list}
}

func sorted(list []Problem) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i].Line, list[j].Line
		if a == 0 || b == 0 {
			return a != 0 && b == 0
		}
		return a < b
	})
}

// Warnings are what is valid but doubtful in c: what `writ validate` prints
// and `writ serve` logs at start. Each names its key and line.
func (c *Config) Warnings() []Problem {
	ps := &problems{pos: c.pos}
	id := c.Identity
	if len(id.JWT) == 0 && id.MTLS == nil && id.StaticTokensFile == "" && c.Envoy.JWTAuthn == nil {
		ps.add("identity", "no identity source (jwt, mtls, static_tokens_file): every caller is anonymous, and the shipped policy admits no anonymous caller")
	}
	if id.MTLS != nil && (c.TLS == nil || c.TLS.Mode() == ClientAuthNone) && !c.Envoy.Enabled() {
		ps.add("identity.mtls", "no caller can be identified by mTLS: the sidecar's listener verifies no client certificate (set tls.client_ca_file), and there is no Envoy to pass one on")
	}
	if c.TLS != nil && c.TLS.Mode() != ClientAuthNone && id.MTLS == nil {
		ps.add("tls.client_ca_file", "client certificates are verified but identify no one: set identity.mtls (trust_domain) to read their SPIFFE IDs")
	}
	if id.StaticTokensFile != "" {
		ps.add("identity.static_tokens_file", "static tokens are for development only")
	}
	if a := c.AuthZEN; a.Enabled() && a.TLS == nil && !loopback(a.Listen) {
		ps.add("authzen.listen", "the AuthZEN listener is not on loopback and serves plain HTTP: the connection between an enforcement point and the decision point must be TLS (set authzen.tls)")
	}
	if t := c.AuthZEN.TLS; c.AuthZEN.Enabled() && t != nil && t.Mode() != ClientAuthNone && id.MTLS == nil {
		ps.add("authzen.tls.client_ca_file", "client certificates are verified but identify no enforcement point: set identity.mtls (trust_domain) to read their SPIFFE IDs")
	}
	if c.AdminTokenFile == "" && !c.AdminLoopback() {
		ps.add("admin", "the admin listener is not on loopback and admin_token_file is not set: its operator routes (task records, the policy, reload, pprof) answer 403; /healthz, /readyz and /metrics stay open")
	}
	if c.Egress.Enabled() && c.Egress.AllowRemote {
		if h, _, err := net.SplitHostPort(c.Egress.Listen); err == nil && !loopbackHost(h) {
			ps.add("egress.allow_remote", "the egress listener is not on loopback: whoever reaches it and knows a forwarded request's decision id acts with that request's authority")
		}
	}
	for i, a := range c.Agents {
		if a.RequireSignedCard && a.CardKeys == "" {
			ps.add(fmt.Sprintf("agents[%d].require_signed_card", i), "without card_keys, a card verifies with whatever key set its signature's jku names: that proves the card unaltered since its jku's owner signed it, not who that owner is; pin the signer's keys with agents[].card_keys")
		}
	}
	for i, t := range c.Egress.Targets {
		if c.Egress.Enabled() && t.RequireSignedCard && t.CardKeys == "" {
			ps.add(fmt.Sprintf("egress.targets[%d].require_signed_card", i), "without card_keys, a card verifies with whatever key set its signature's jku names: that proves the card unaltered since its jku's owner signed it, not who that owner is; pin the signer's keys with egress.targets[].card_keys")
		}
		if c.Egress.Enabled() && t.CardURL != "" && t.Upstream == "" && !t.RequireSignedCard && t.CardKeys == "" {
			ps.add(fmt.Sprintf("egress.targets[%d].card_url", i), "without upstream, the card's first interface is where every call and its token go, and nothing checks who wrote the card: set require_signed_card (and card_keys), or upstream")
		}
	}
	sorted(ps.list)
	return ps.list
}

// Line is the line of key in the file c was parsed from, else of its
// nearest parent there, else 0.
func (c *Config) Line(key string) int { return c.pos.line(key) }
