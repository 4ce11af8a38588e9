package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Facts are what the configuration tells the policies: platform facts kept
// with the agents and tenants they describe, while the policy data file stays
// the place for rules. PolicyFacts lays them out under data.writ.config, where
// the policy engine merges them over the data files at load (objects merged,
// lists joined).

// Tenant is what writ knows of one caller tenant.
type Tenant struct {
	// CallbackHosts are the hosts this tenant's push callbacks may go to
	// (data.writ.config.callbacks.tenants[tenant]).
	CallbackHosts []string `yaml:"callback_hosts"`
}

// PolicyFacts is the configuration's facts as a data document:
//
//	{"writ": {"config": {"callbacks": {"targets": {agent: [host]}, "tenants": {tenant: [host]}}}}}
//
// with host names lower-cased and sorted. It is nil when there are none.
func (c *Config) PolicyFacts() map[string]any {
	targets, tenants := map[string]any{}, map[string]any{}
	for _, a := range c.Agents {
		if len(a.CallbackHosts) > 0 {
			targets[a.Name] = hostList(a.CallbackHosts)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		if hs := c.Tenants[name].CallbackHosts; len(hs) > 0 {
			tenants[name] = hostList(hs)
		}
	}
	if len(targets) == 0 && len(tenants) == 0 {
		return nil
	}
	callbacks := map[string]any{}
	if len(targets) > 0 {
		callbacks["targets"] = targets
	}
	if len(tenants) > 0 {
		callbacks["tenants"] = tenants
	}
	return map[string]any{"writ": map[string]any{"config": map[string]any{"callbacks": callbacks}}}
}

func hostList(hs []string) []any {
	var out []string
	for _, h := range hs {
		out = append(out, strings.ToLower(h))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	list := make([]any, len(out))
	for i, h := range out {
		list[i] = h
	}
	return list
}

// validateFacts checks the facts: callback hosts are exact host names or IP
// addresses (the policy compares them with the callback URL's host as is).
func (c *Config) validateFacts(bad func(key, format string, args ...any)) {
	check := func(key string, hs []string) {
		for j, h := range hs {
			if strings.HasPrefix(h, "*.") {
				bad(fmt.Sprintf("%s[%d]", key, j), "%q: callback hosts are exact names, not wildcards", h)
				continue
			}
			if err := validHostPattern(h); err != nil {
				bad(fmt.Sprintf("%s[%d]", key, j), "%v", err)
			}
		}
	}
	for i, a := range c.Agents {
		check(fmt.Sprintf("agents[%d].callback_hosts", i), a.CallbackHosts)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		if name == "" || strings.ContainsAny(name, "/ \\") {
			bad("tenants", "%q is not a tenant name", name)
		}
		check(fmt.Sprintf("tenants.%s.callback_hosts", name), c.Tenants[name].CallbackHosts)
	}
}
