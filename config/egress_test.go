package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// oneAgent is a config with one agent, to which egress blocks are added.
const oneAgent = `
agents:
  - {name: investigator, upstream: "http://127.0.0.1:9001", max_data_classification: restricted, security_schemes: [oauth2]}
`

const goodEgress = oneAgent + `egress:
  listen: 127.0.0.1:8090
  exchange: {issuer: "https://sts.example", actor_token_file: /run/svid}
  targets:
    - {name: sanctions-screening-agent, upstream: "https://sanctions.example", max_data_classification: restricted, security_schemes: [oauth2]}
`

func TestEgressDefaults(t *testing.T) {
	c, err := Parse([]byte(goodEgress))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Egress
	if !e.Enabled() || e.Agent != "investigator" || e.LinkTTL != time.Hour || e.MaxLinkBytes != 16<<20 ||
		e.MaxLinkBytesPerCaller != 2<<20 || e.Exchange.Timeout != DefaultExchangeTimeout {
		t.Fatalf("defaults %+v", e)
	}
	tg := e.Targets[0]
	if tg.Audience != "agent:sanctions-screening-agent" || tg.Protocol != "auto" || tg.JSONRPCPath != "/" {
		t.Fatalf("target defaults %+v", tg)
	}
	if a := tg.AsAgent(); a.Name != tg.Name || a.Route != "/" || a.MaxDataClassification != "restricted" {
		t.Fatalf("as an agent %+v", a)
	}
	if len(c.Warnings()) != 1 { // no identity source, nothing of egress
		t.Fatalf("warnings %v", c.Warnings())
	}
	off, err := Parse([]byte(oneAgent + "egress: {targets: [{name: x}]}\n"))
	if err != nil || off.Egress.Enabled() {
		t.Fatalf("egress without listen is off and not checked: %v", err)
	}
}

// TestEgressValidation: every problem of the egress block names its key.
func TestEgressValidation(t *testing.T) {
	for name, c := range map[string]struct{ yaml, key, msg string }{
		"not loopback":  {strings.Replace(goodEgress, "127.0.0.1:8090", "0.0.0.0:8090", 1), "egress.listen", "not a loopback address"},
		"not host:port": {strings.Replace(goodEgress, "127.0.0.1:8090", "8090", 1), "egress.listen", "not host:port"},
		"unknown agent": {strings.Replace(goodEgress, "  listen:", "  agent: nobody\n  listen:", 1), "egress.agent", `"nobody" is not one of agents[]`},
		"no agent named with two agents": {strings.Replace(goodEgress, "egress:", "  - {name: b, route: /b, upstream: \"http://127.0.0.1:9002\", max_data_classification: public, security_schemes: [oauth2]}\negress:", 1),
			"egress.agent", "required when more than one agent"},
		"no targets":           {oneAgent + "egress:\n  listen: 127.0.0.1:8090\n  exchange: {issuer: \"https://sts.example\", actor_token_file: /run/svid}\n", "egress.targets", "at least one target"},
		"a name with a slash":  {strings.Replace(goodEgress, "name: sanctions-screening-agent", "name: a/b", 1), "egress.targets[0].name", "no /"},
		"a bad upstream":       {strings.Replace(goodEgress, "https://sanctions.example", "ftp://x", 1), "egress.targets[0].upstream", "http(s) URL"},
		"no classification":    {strings.Replace(goodEgress, `example", max_data_classification: restricted, security_schemes: [oauth2]}`, `example", security_schemes: [oauth2]}`, 1), "egress.targets[0].max_data_classification", "required"},
		"a scope with a space": {strings.Replace(goodEgress, `example", max_data_classification: restricted, security_schemes: [oauth2]}`, `example", max_data_classification: restricted, security_schemes: [oauth2], scopes: ["a b"]}`, 1), "egress.targets[0].scopes[0]", "one scope value"},
		"the exchange block":   {strings.Replace(goodEgress, "https://sts.example", "http://sts.example", 1), "egress.exchange.issuer", "must be https"},
		"no actor credential":  {strings.Replace(goodEgress, ", actor_token_file: /run/svid", "", 1), "egress.exchange.client_id", "one of client_id"},
		"a share over the whole": {strings.Replace(goodEgress, "  listen:", "  max_link_bytes: 1000\n  max_link_bytes_per_caller: 2000\n  listen:", 1),
			"egress.max_link_bytes_per_caller", "at most max_link_bytes"},
		"a long link ttl":               {strings.Replace(goodEgress, "  listen:", "  link_ttl: 48h\n  listen:", 1), "egress.link_ttl", "to 24h0m0s"},
		"neither upstream nor card_url": {strings.Replace(goodEgress, `upstream: "https://sanctions.example", `, "", 1), "egress.targets[0].upstream", "required (or card_url)"},
		"a card_url that is no card's":  {strings.Replace(goodEgress, `upstream: "https://sanctions.example"`, `card_url: "https://sanctions.example/"`, 1), "egress.targets[0].card_url", "URL of a card"},
		"a card_url with a query":       {strings.Replace(goodEgress, `upstream: "https://sanctions.example"`, `card_url: "https://s.example/card.json?x=1"`, 1), "egress.targets[0].card_url", "URL of a card"},
		"a card_url twice": {strings.Replace(goodEgress, `    - {name: sanctions-screening-agent, upstream: "https://sanctions.example"`,
			`    - {name: a, card_url: "https://s.example/card.json", max_data_classification: public, security_schemes: [oauth2]}
    - {name: sanctions-screening-agent, card_url: "https://s.example/card.json"`, 1), "egress.targets[1].card_url", "used twice"},
		"a card_url on a private address": {strings.Replace(goodEgress, `upstream: "https://sanctions.example"`, `card_url: "https://10.0.0.7/card.json"`, 1),
			"egress.targets[0].card_url", `"https://10.0.0.7/card.json": a private address: the egress SSRF guard refuses it unless egress.trusted_hosts names the host`},
		"a card_url on loopback": {strings.Replace(goodEgress, `upstream: "https://sanctions.example"`, `upstream: "https://sanctions.example", card_url: "https://[::1]:8443/card.json"`, 1),
			"egress.targets[0].card_url", "a loopback address"},
		"a card_url over plain http": {strings.Replace(goodEgress, `upstream: "https://sanctions.example"`, `card_url: "http://sanctions.example/card.json"`, 1),
			"egress.targets[0].card_url", "plain http: the egress SSRF guard refuses it"},
		"an upstream on a link-local address": {strings.Replace(goodEgress, "https://sanctions.example", "https://169.254.169.254", 1),
			"egress.targets[0].upstream", "a link-local address"},
		"card_keys with spaces": {strings.Replace(goodEgress, `example", max_data_classification: restricted, security_schemes: [oauth2]}`, `example", max_data_classification: restricted, security_schemes: [oauth2], card_keys: ' k.json'}`, 1), "egress.targets[0].card_keys", "without surrounding spaces"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			var ps *Problems
			if !errors.As(err, &ps) {
				t.Fatalf("accepted: %v", err)
			}
			for _, p := range ps.List {
				if p.Key == c.key && strings.Contains(p.Msg, c.msg) {
					return
				}
			}
			t.Fatalf("want %s: ...%s..., got %v", c.key, c.msg, err)
		})
	}
}

// TestEgressAllowRemote: a non-loopback egress listener loads with
// allow_remote, and says what it risks.
func TestEgressAllowRemote(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(goodEgress, "  listen: 127.0.0.1:8090", "  listen: 0.0.0.0:8090\n  allow_remote: true", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range c.Warnings() {
		if w.Key == "egress.allow_remote" && strings.Contains(w.Msg, "decision id") {
			return
		}
	}
	t.Fatalf("no warning: %v", c.Warnings())
}

// TestEgressTargetByCard: a target may be named by its card's URL alone; it
// is found by that URL, exactly, and its card checks carry over to the
// agent entry the policy input and the card checks read; require_signed_card
// without pinned keys says what it proves.
func TestEgressTargetByCard(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(goodEgress, `upstream: "https://sanctions.example"`,
		`card_url: "https://sanctions.example/.well-known/agent-card.json", require_signed_card: true`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	tg, ok := c.Egress.TargetByCard("https://sanctions.example/.well-known/agent-card.json")
	if !ok || tg.Name != "sanctions-screening-agent" || tg.Upstream != "" {
		t.Fatalf("by card: %+v %v", tg, ok)
	}
	for _, other := range []string{"https://sanctions.example/.well-known/agent-card.json/", "https://SANCTIONS.example/.well-known/agent-card.json", ""} {
		if _, ok := c.Egress.TargetByCard(other); ok {
			t.Errorf("%q names the target", other)
		}
	}
	if a := tg.AsAgent(); !a.RequireSignedCard {
		t.Errorf("as an agent %+v", a)
	}
	found := false
	for _, w := range c.Warnings() {
		found = found || w.Key == "egress.targets[0].require_signed_card" && strings.Contains(w.Msg, "card_keys")
	}
	if !found {
		t.Errorf("no warning about unpinned keys: %v", c.Warnings())
	}
}

// TestEgressTrustedTargets: a target on a private or loopback address, or
// over plain http, loads when egress.trusted_hosts names its host (as the
// guard matches it: an address in any notation, a name in any case); a card
// that alone says where the calls go, unchecked, is warned about.
func TestEgressTrustedTargets(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(strings.Replace(goodEgress, "  listen:", "  trusted_hosts: [\"10.0.0.7\", \"::1\", Sanctions.Example.]\n  listen:", 1),
		`upstream: "https://sanctions.example"`, `card_url: "http://sanctions.example/card.json", max_data_classification: public, security_schemes: [oauth2]}
    - {name: b, upstream: "http://[0:0::1]:9000", card_url: "https://10.0.0.7/card.json"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, w := range c.Warnings() {
		if strings.HasPrefix(w.Key, "egress.") {
			warned = append(warned, w.Key+": "+w.Msg)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "egress.targets[0].card_url: without upstream, the card's first interface is where every call") {
		t.Fatalf("warnings %v", warned)
	}
}
