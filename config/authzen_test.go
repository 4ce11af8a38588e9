package config

import (
	"strings"
	"testing"
)

// authzenGood is a valid config with the AuthZEN listener on.
var authzenGood = good + `authzen:
  listen: 127.0.0.1:8479
  clients: [gateway]
  applications:
    - {name: todo, package: todo}
`

// TestAuthZENDefaults: the AuthZEN keys' defaults, and off unless listen
// is set.
func TestAuthZENDefaults(t *testing.T) {
	c, err := Parse([]byte(authzenGood))
	if err != nil {
		t.Fatal(err)
	}
	a := c.AuthZEN
	if !a.Enabled() || a.MaxEvaluations != DefaultAuthZENMaxEvaluations || a.PageSize != DefaultAuthZENPageSize ||
		a.MaxSearchCandidates != DefaultAuthZENSearchCandidates || a.Delegation.Disabled || a.Delegation.TrustSubjectProperties {
		t.Errorf("defaults: %+v", a)
	}
	if ref := a.Applications[0].PackageRef(); ref != "data.todo" {
		t.Errorf("package ref %q", ref)
	}
	off, err := Parse([]byte(good))
	if err != nil || off.AuthZEN.Enabled() {
		t.Errorf("off by default: %v %+v", err, off.AuthZEN)
	}
}

// TestAuthZENInvalid: each bad AuthZEN key is refused at load, named.
func TestAuthZENInvalid(t *testing.T) {
	for key, mutate := range map[string]func(string) string{
		"authzen.listen": func(s string) string { return strings.Replace(s, "127.0.0.1:8479", "8479", 1) },
		"authzen.listen: \"127.0.0.1:8081\" is already listen": func(s string) string { return strings.Replace(s, "127.0.0.1:8479", "127.0.0.1:8081", 1) },
		"authzen.clients: required":                            func(s string) string { return strings.Replace(s, "  clients: [gateway]\n", "", 1) },
		"authzen.clients[0]":                                   func(s string) string { return strings.Replace(s, "[gateway]", "[' gateway']", 1) },
		"authzen.public_url":                                   func(s string) string { return s + "  public_url: ftp://pdp\n" },
		"authzen.public_url: \"https://pdp.bank.ae/?x=1\"":     func(s string) string { return s + "  public_url: https://pdp.bank.ae/?x=1\n" },
		"authzen.max_evaluations":                              func(s string) string { return s + "  max_evaluations: 1001\n" },
		"authzen.page_size":                                    func(s string) string { return s + "  page_size: -1\n" },
		"authzen.max_search_candidates":                        func(s string) string { return s + "  max_search_candidates: 10001\n" },
		"authzen.applications[0].name":                         func(s string) string { return strings.Replace(s, "name: todo,", "name: Todo/x,", 1) },
		"authzen.applications[1].name: \"todo\" is used twice": func(s string) string { return s + "    - {name: todo, package: other}\n" },
		"authzen.applications[0].name: \"access\"":             func(s string) string { return strings.Replace(s, "name: todo,", "name: access,", 1) },
		"authzen.applications[0].package: \"todo..x\"":         func(s string) string { return strings.Replace(s, "package: todo}", "package: todo..x}", 1) },
		"authzen.applications[0].package: \"writ.authz\" is writ's own": func(s string) string {
			return strings.Replace(s, "package: todo}", "package: writ.authz}", 1)
		},
		"authzen.tls.key_file": func(s string) string { return s + "  tls: {cert_file: c.pem}\n" },
		"authzen.delegation.disabled": func(s string) string {
			return strings.Replace(s, "  applications:\n    - {name: todo, package: todo}\n", "  delegation: {disabled: true}\n", 1)
		},
		"authzen.unknown: unknown key": func(s string) string { return s + "  unknown: 1\n" },
	} {
		_, err := Parse([]byte(mutate(authzenGood)))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v", key, err)
		}
	}
}

// TestAuthZENWarnings: a plain-HTTP AuthZEN listener off loopback, and
// client certificates that identify no one, are warned about.
func TestAuthZENWarnings(t *testing.T) {
	warned := func(yaml, key string) bool {
		c, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.Warnings() {
			if w.Key == key {
				return true
			}
		}
		return false
	}
	if warned(authzenGood, "authzen.listen") {
		t.Errorf("a loopback listener warned about")
	}
	if !warned(strings.Replace(authzenGood, "127.0.0.1:8479", "0.0.0.0:8479", 1), "authzen.listen") {
		t.Errorf("a plain-HTTP listener off loopback not warned about")
	}
	if !warned(authzenGood+"  tls: {cert_file: c.pem, key_file: k.pem, client_ca_file: ca.pem}\n", "authzen.tls.client_ca_file") {
		t.Errorf("client certificates without identity.mtls not warned about")
	}
}
