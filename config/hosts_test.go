package config

import (
	"strings"
	"testing"
)

// TestAgentHosts: host patterns are validated, and two agents a request could
// not tell apart (same host pattern, same route) are refused with the key
// named; the same route on different hosts is fine.
func TestAgentHosts(t *testing.T) {
	agents := func(lines ...string) string {
		out := "policies: [../policies]\nagents:\n"
		for _, l := range lines {
			out += "  - {" + l + ", upstream: 'http://127.0.0.1:9001', max_data_classification: public, security_schemes: [oauth2]}\n"
		}
		return out
	}
	ok := []string{
		agents("name: a, hosts: [a.agents.example]", "name: b, hosts: [b.agents.example]"),
		agents("name: a, hosts: [a.agents.example]", "name: b"),
		agents("name: a, hosts: ['*.agents.example']", "name: b, hosts: [x.agents.example]"),
		agents("name: a, hosts: [10.0.0.1, '::1']", "name: b, route: /b"),
		agents("name: a, route: /kyc", "name: b, route: /kyc/x"),
	}
	for _, y := range ok {
		if _, err := Parse([]byte(y)); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
	bad := map[string][]string{
		agents("name: a, hosts: [a.agents.example]", "name: b, hosts: [A.Agents.Example]"): {"agents[1].route", "host A.Agents.Example", "agents[0]"},
		agents("name: a", "name: b"):                            {"agents[1].route", "any host"},
		agents("name: a, route: /kyc", "name: b, route: /kyc/"): {"agents[1].route"},
		agents("name: a, hosts: ['a.example:443']"):             {"agents[0].hosts[0]", "no port"},
		agents("name: a, hosts: ['https://a.example']"):         {"agents[0].hosts[0]"},
		agents("name: a, hosts: ['a.*.example']"):               {"agents[0].hosts[0]"},
		agents("name: a, hosts: ['*']"):                         {"agents[0].hosts[0]"},
		agents("name: a, hosts: ['']"):                          {"agents[0].hosts[0]"},
		agents("name: a, hosts: ['bad host']"):                  {"agents[0].hosts[0]"},
	}
	for y, wants := range bad {
		_, err := Parse([]byte(y))
		if err == nil {
			t.Errorf("accepted %s", y)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", y, err, w)
			}
		}
	}
}
