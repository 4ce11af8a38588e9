package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const good = `
listen: 127.0.0.1:8081
policies: [../policies]
identity:
  jwt:
    - issuer: https://idp.bank.ae
      audiences: [a2a-gateway]
      jwks_file: ../testdata/identity/bench_jwks.json
agents:
  - name: sanctions-screening-agent
    upstream: http://127.0.0.1:9001
    public_url: https://sanctions.agents.bank.ae
    owner: group-compliance
    tenants: [wholesale, retail]
    max_data_classification: restricted
    security_schemes: [oauth2, mtls]
  - name: kyc-refresh-agent
    route: /kyc
    protocol: acp
    upstream: http://127.0.0.1:9002
    max_data_classification: confidential
    security_schemes: [oauth2]
`

func TestDefaultsAndRouting(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.DecisionLog.Output != "stdout" || c.DecisionLog.Format != "writ" || c.DecisionLog.MaxSizeMB != 100 || c.DecisionLog.CheckpointEvery != 1000 || c.DecisionLog.SigningKeyFile != "" || c.Metrics.TenantLabels || c.AdminPprof {
		t.Errorf("decision log / metrics defaults: %+v %+v", c.DecisionLog, c.Metrics)
	}
	if c.Push.Disabled || c.Push.Workers != 4 || c.Push.MaxAttempts != 5 || c.Push.MaxConfigsPerTask != 10 ||
		c.Push.MaxInFlightPerHost != 2 || c.Push.MaxInFlightPerOwner != 2 ||
		c.Lifecycle.MaxFollowers != 256 || c.Lifecycle.MaxFollowersPerOwner != 64 {
		t.Errorf("push defaults: %+v", c.Push)
	}
	if c.Listen != "127.0.0.1:8081" || c.Admin != DefaultAdmin || c.Limits.MaxBodyBytes != 1<<20 ||
		c.Limits.ReadHeaderTimeout != 5*time.Second || c.Limits.MaxReferencedTasks != 16 || c.Lifecycle.UnknownTasks != "deny" || c.DefaultClassification != "internal" {
		t.Errorf("defaults: %+v", c)
	}
	a := c.Agents[0]
	if a.Route != "/" || a.Protocol != "auto" || a.JSONRPCPath != "/" {
		t.Errorf("agent defaults: %+v", a)
	}
	for path, want := range map[string][2]string{
		"/":                   {"sanctions-screening-agent", "/"},
		"/message:send":       {"sanctions-screening-agent", "/message:send"},
		"/kyc":                {"kyc-refresh-agent", "/"},
		"/kyc/runs":           {"kyc-refresh-agent", "/runs"},
		"/kycx/runs":          {"sanctions-screening-agent", "/kycx/runs"},
		"/.well-known/x.json": {"sanctions-screening-agent", "/.well-known/x.json"},
	} {
		got, rest, ok := c.Route(path)
		if !ok || got.Name != want[0] || rest != want[1] {
			t.Errorf("Route(%q) = %v %q %v, want %v", path, got, rest, ok, want)
		}
	}
	first := c.Agents[0]
	if first.Name != "sanctions-screening-agent" || first.MaxDataClassification != "restricted" || len(first.Tenants) != 2 {
		t.Errorf("agent %+v", first)
	}
}

// TestInvalid: each bad key is refused with its name in the error.
func TestInvalid(t *testing.T) {
	for key, mutate := range map[string]func(string) string{
		"agents[0].upstream": func(s string) string { return strings.Replace(s, "http://127.0.0.1:9001", "ftp://x", 1) },
		"agents[1].protocol": func(s string) string { return strings.Replace(s, "protocol: acp", "protocol: smtp", 1) },
		"agents[0].max_data_classification": func(s string) string {
			return strings.Replace(s, "max_data_classification: restricted", "max_data_classification: secret", 1)
		},
		"agents[1].security_schemes[0]": func(s string) string {
			return strings.Replace(s, "security_schemes: [oauth2]", "security_schemes: [kerberos]", 1)
		},
		"agents[1].route": func(s string) string { return strings.Replace(s, "route: /kyc", "route: kyc", 1) },
		// Routes are matched against canonical paths: one no canonical path
		// can spell is refused.
		"agents[1].route: \"/kyc/../x\"": func(s string) string { return strings.Replace(s, "route: /kyc", "route: /kyc/../x", 1) },
		"agents[1].route: \"/%6Byc\"":    func(s string) string { return strings.Replace(s, "route: /kyc", "route: /%6Byc", 1) },
		"agents[1].route: \"//kyc\"":     func(s string) string { return strings.Replace(s, "route: /kyc", "route: //kyc", 1) },
		"agents[1].name": func(s string) string {
			return strings.Replace(s, "name: kyc-refresh-agent", "name: sanctions-screening-agent", 1)
		},
		"listen":                  func(s string) string { return strings.Replace(s, "127.0.0.1:8081", "8081", 1) },
		"nonsense: unknown key":   func(s string) string { return s + "nonsense: 1\n" },
		"lifecycle.unknown_tasks": func(s string) string { return s + "lifecycle:\n  unknown_tasks: maybe\n" },
		"lifecycle.retired_ids.capacity": func(s string) string {
			return s + "lifecycle:\n  retired_ids: {capacity: -1}\n"
		},
		"lifecycle.retired_ids.false_positive_rate": func(s string) string {
			return s + "lifecycle:\n  retired_ids: {false_positive_rate: 0.7}\n"
		},
		"lifecycle.retired_ids: retired ids: 1000000000 ids": func(s string) string {
			return s + "lifecycle:\n  retired_ids: {capacity: 1000000000}\n"
		},
		"push.trusted_hosts[0]":               func(s string) string { return s + "push:\n  trusted_hosts: ['http://x/']\n" },
		"push: bounds":                        func(s string) string { return s + "push:\n  max_attempts: -1\n" },
		"lifecycle: task and follower bounds": func(s string) string { return s + "lifecycle:\n  max_followers_per_owner: -1\n" },
		"push: bounds ":                       func(s string) string { return s + "push:\n  max_in_flight_per_owner: -1\n" },
		"decision_log.format":                 func(s string) string { return s + "decision_log:\n  format: syslog\n" },
		"decision_log.checkpoint_every: must be from 1 to 1000000": func(s string) string {
			return s + "decision_log:\n  checkpoint_every: -1\n"
		},
		"decision_log.checkpoint_every: must be from 1 to 1000000 ": func(s string) string {
			return s + "decision_log:\n  checkpoint_every: 1000001\n"
		},
		"decision_log.signing_key_file": func(s string) string { return s + "decision_log:\n  signing_key_file: ' '\n" },
		"cards.signing_key_file":        func(s string) string { return s + "cards:\n  signing_key_file: ' card.jwk'\n" },
		"cards.jku_trusted_hosts[0]":    func(s string) string { return s + "cards:\n  jku_trusted_hosts: ['https://x/']\n" },
		"cards.jku_trusted_hosts[1]":    func(s string) string { return s + "cards:\n  jku_trusted_hosts: ['::1', 'x:443']\n" },
		"agents[0].card_keys: \" k.jwks\"": func(s string) string {
			return strings.Replace(s, "max_data_classification: restricted", "max_data_classification: restricted\n    card_keys: ' k.jwks'", 1)
		},
		"agents: at least one": func(string) string { return "listen: 127.0.0.1:1\n" },
		"limits.max_referenced_tasks: must be from 1 to 256": func(s string) string {
			return s + "limits:\n  max_referenced_tasks: -1\n"
		},
		"limits.max_referenced_tasks: must be from 1 to 256 ": func(s string) string {
			return s + "limits:\n  max_referenced_tasks: 257\n"
		},
	} {
		_, err := Parse([]byte(mutate(good)))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v", key, err)
		}
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "writ.yaml")
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path + ".missing"); err == nil {
		t.Fatal("missing file loaded")
	}
}

// TestEnvoy: the envoy section's defaults, and each bad key refused by name.
func TestEnvoy(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Envoy
	if e.Enabled() || !e.ParsesBody() || e.MaxRequestBytes != 0 || e.BodyLimit(c.Limits) != c.Limits.MaxBodyBytes || e.DryRun || e.AllowPartialBody ||
		e.JWTAuthn != nil || e.Reflection || e.HTTPPathPrefix != "" || e.ExtProcListen != "" || e.ResponseLimit() != DefaultMaxResponseBytes ||
		!e.RequiresRouteName() {
		t.Errorf("envoy defaults: %+v", e)
	}
	c, err = Parse([]byte(good + `envoy:
  grpc_listen: 127.0.0.1:9191
  http_listen: 127.0.0.1:9192
  http_path_prefix: /authz
  max_request_bytes: 8192
  parse_body: false
  jwt_authn: {issuers: [https://idp.bank.ae]}
  ext_proc_listen: 127.0.0.1:9193
  max_response_bytes: 65536
  require_route_name: false
`))
	if err != nil {
		t.Fatal(err)
	}
	e = c.Envoy
	if !e.Enabled() || e.ParsesBody() || e.BodyLimit(c.Limits) != 8192 || e.JWTAuthn.Namespace != DefaultJWTAuthnNamespace ||
		e.ExtProcListen != "127.0.0.1:9193" || e.ResponseLimit() != 65536 || e.RequiresRouteName() {
		t.Errorf("envoy: %+v", e)
	}
	for key, section := range map[string]string{
		"envoy.grpc_listen":                                   "envoy: {grpc_listen: '9191'}",
		"envoy.http_listen: \"127.0.0.1:9":                    "envoy: {grpc_listen: '127.0.0.1:9191', http_listen: '127.0.0.1:9191'}",
		"envoy.http_listen: \"127.0.0.1:8":                    "envoy: {http_listen: '127.0.0.1:8081'}",
		"envoy.http_path_prefix":                              "envoy: {http_listen: '127.0.0.1:9192', http_path_prefix: authz/}",
		"envoy.max_request_bytes: 2097152":                    "envoy: {max_request_bytes: 2097152}",
		"envoy.max_request_bytes: must":                       "envoy: {max_request_bytes: -1}",
		"envoy.jwt_authn.issuers":                             "envoy: {jwt_authn: {namespace: x}}",
		"envoy.jwt_authn.issuers[1]":                          "envoy: {jwt_authn: {issuers: [a, '']}}",
		"envoy.grpc: unknown key (did you mean grpc_listen?)": "envoy: {grpc: x}",
		"envoy.ext_proc_listen: \"9193":                       "envoy: {ext_proc_listen: '9193'}",
		"envoy.ext_proc_listen: \"127.0.0.1:9":                "envoy: {grpc_listen: '127.0.0.1:9191', ext_proc_listen: '127.0.0.1:9191'}",
		"envoy.ext_proc_listen: \"127.0.0.1:8":                "envoy: {ext_proc_listen: '127.0.0.1:8081'}",
		"envoy.max_response_bytes: must":                      "envoy: {max_response_bytes: -1}",
		"envoy.max_response_bytes: 33554433":                  "envoy: {max_response_bytes: 33554433}",
		"envoy.require_route_name: must be true or false":     "envoy: {require_route_name: maybe}",
	} {
		_, err := Parse([]byte(good + section + "\n"))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: got %v", key, err)
		}
	}
}

// TestAdminAccessKeys: admin_hosts are exact host names or IPs; an admin
// listener beyond loopback without admin_token_file is a warning (its
// operator routes are off), on loopback or with a token file it is not.
func TestAdminAccessKeys(t *testing.T) {
	base := "agents: [{name: a, upstream: 'http://127.0.0.1:9', max_data_classification: public, security_schemes: [oauth2]}]\n" +
		"identity: {static_tokens_file: s.json}\n"
	for yaml, wantErr := range map[string]string{
		"admin_hosts: [writ-admin.internal, 10.0.0.5]\n": "",
		"admin_hosts: ['*.internal']\n":                  "admin_hosts[0]",
		"admin_hosts: ['writ-admin:8477']\n":             "admin_hosts[0]",
		"admin_hosts: ['https://x']\n":                   "admin_hosts[0]",
		"admin_token_file: ' /t'\n":                      "admin_token_file",
	} {
		c, err := Parse([]byte(base + yaml))
		if err == nil {
			err = c.Validate()
		}
		if (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("%q: %v, want an error on %q", yaml, err, wantErr)
		}
	}
	warns := func(yaml string) bool {
		c, err := Parse([]byte(base + yaml))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.Warnings() {
			if w.Key == "admin" && strings.Contains(w.Msg, "admin_token_file") {
				return true
			}
		}
		return false
	}
	for yaml, want := range map[string]bool{"": false, "admin: 'localhost:8477'\n": false, "admin: '[::1]:8477'\n": false,
		"admin: '0.0.0.0:8477'\n": true, "admin: ':8477'\n": true, "admin: '10.0.0.5:8477'\n": true,
		"admin: '0.0.0.0:8477'\nadmin_token_file: /etc/writ/admin/token\n": false} {
		if got := warns(yaml); got != want {
			t.Errorf("%q: warns %v, want %v", yaml, got, want)
		}
	}
}

// TestRetiredIDsDefaults: the retired-id set holds ten times max_tasks ids, at
// least a million, at a false-positive rate of one in a million.
func TestRetiredIDsDefaults(t *testing.T) {
	for extra, want := range map[string]int{"": 1_000_000, "lifecycle: {max_tasks: 500000}\n": 5_000_000,
		"lifecycle: {retired_ids: {capacity: 2000}}\n": 2000} {
		c, err := Parse([]byte(good + extra))
		if err != nil {
			t.Fatal(err)
		}
		if r := c.Lifecycle.RetiredIDs; r.Capacity != want || r.FalsePositiveRate != 1e-6 {
			t.Errorf("%q: retired_ids %+v, want capacity %d at 1e-6", extra, r, want)
		}
	}
}

// TestDecisionLogMask: decision_log.include_input is off by default, and a
// mask that names no member of the policy input is refused at load, on its
// line, with the member it may have meant; the ones that do are kept.
func TestDecisionLogMask(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.DecisionLog.IncludeInput || len(c.DecisionLog.Mask) != 0 {
		t.Fatalf("decision log defaults: %+v", c.DecisionLog)
	}
	c, err = Parse([]byte(good + "decision_log:\n  include_input: true\n  mask: [input.caller.user_id, input.caller.claims.email, input.caller.hops.tenant]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DecisionLog.IncludeInput || len(c.DecisionLog.Mask) != 3 {
		t.Fatalf("decision log: %+v", c.DecisionLog)
	}
	src := good + "decision_log:\n  include_input: true\n  mask:\n    - input.caller.user_id\n    - input.caller.sub\n    - caller.tenant\n    - input.version\n"
	_, err = Parse([]byte(src))
	line := strings.Count(good, "\n") + 5
	for _, want := range []string{
		fmt.Sprintf("line %d: decision_log.mask[1]: \"input.caller.sub\" names no member of the policy input (did you mean input.caller.claims.sub?", line),
		fmt.Sprintf("line %d: decision_log.mask[2]: \"caller.tenant\" does not start with input. (did you mean input.caller.tenant?)", line+1),
		fmt.Sprintf("line %d: decision_log.mask[3]: \"input.version\" cannot be masked", line+2),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "mask[0]") {
		t.Errorf("a good mask refused: %v", err)
	}
}
