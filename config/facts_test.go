package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPolicyFacts: callback hosts from agents[] and tenants: become the
// policy data document under data.writ.config.callbacks, lower-cased,
// sorted and without repeats; no facts, no document.
func TestPolicyFacts(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.PolicyFacts(); f != nil {
		t.Fatalf("no facts configured, got %v", f)
	}
	yaml := strings.Replace(good, "    security_schemes: [oauth2, mtls]\n",
		"    security_schemes: [oauth2, mtls]\n    callback_hosts: [Hooks.Bank.ae, 10.0.0.7, hooks.bank.ae]\n", 1) +
		"tenants:\n  wholesale: {callback_hosts: [cb.wholesale.example]}\n  retail: {}\n"
	c, err = Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(c.PolicyFacts())
	want := `{"writ":{"config":{"callbacks":{"targets":{"sanctions-screening-agent":["10.0.0.7","hooks.bank.ae"]},"tenants":{"wholesale":["cb.wholesale.example"]}}}}}`
	if string(raw) != want {
		t.Fatalf("facts\n got %s\nwant %s", raw, want)
	}
}

// TestPolicyFactsValidated: a callback host that is a wildcard, a URL or has
// a port is refused with its key named.
func TestPolicyFactsValidated(t *testing.T) {
	for key, extra := range map[string]string{
		"agents[0].callback_hosts[0]":         "agents0:['*.bank.ae']",
		"agents[0].callback_hosts[1]":         "agents0:[ok.example, 'https://x/']",
		"tenants.wholesale.callback_hosts[0]": "tenants:\n  wholesale: {callback_hosts: ['cb.example:443']}\n",
		"tenants":                             "tenants:\n  'a/b': {}\n",
	} {
		yaml := good
		if hosts, ok := strings.CutPrefix(extra, "agents0:"); ok {
			yaml = strings.Replace(good, "    security_schemes: [oauth2, mtls]\n",
				"    security_schemes: [oauth2, mtls]\n    callback_hosts: "+hosts+"\n", 1)
		} else {
			yaml += extra
		}
		_, err := Parse([]byte(yaml))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v", key, err)
		}
	}
}
