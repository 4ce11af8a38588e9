package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const one = `listen: 127.0.0.1:8081
agents:
  - name: my-agent
    upstream: http://127.0.0.1:9000
    max_data_classification: confidential
    security_schemes: [oauth2]
`

// TestProblemsNameKeyAndLine: every problem names its key path and line, an
// unknown key says what it probably is, and no message names a Go type.
func TestProblemsNameKeyAndLine(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"misspelt key": {strings.Replace(one, "upstream:", "upstrem:", 1),
			"line 4: agents[0].upstrem: unknown key (did you mean upstream?)"},
		"key at the wrong level": {one + "max_tasks: 5\n",
			"line 7: max_tasks: unknown key (did you mean lifecycle.max_tasks?)"},
		"prefix of a key": {one + "envoy: {grpc: x}\n",
			"line 7: envoy.grpc: unknown key (did you mean grpc_listen?)"},
		"bare number as a duration": {one + "limits:\n  read_timeout: 5\n",
			"line 8: limits.read_timeout: 5 is not a duration: give its unit, as in 5s (units: ms, s, m, h)"},
		"not a duration": {one + "lifecycle: {ttl: a day}\n",
			`line 7: lifecycle.ttl: "a day" is not a duration such as 5s`},
		"not a number": {one + "limits:\n  max_body_bytes: 1MB\n",
			`line 8: limits.max_body_bytes: must be a whole number, not "1MB"`},
		"not a bool": {one + "dry_run: maybe\n", `line 7: dry_run: must be true or false, not "maybe"`},
		"not a list": {strings.Replace(one, "[oauth2]", "oauth2", 1), "line 6: agents[0].security_schemes: must be a list"},
		"not a mapping": {one + "limits: 5\n",
			"line 7: limits: must be a mapping of keys (allow_chunked_requests, card_cache_ttl"},
		"a value where a list is": {one + "policies: {a: b}\n", "line 7: policies: must be a list"},
		"validation, with the line": {strings.Replace(one, "http://127.0.0.1:9000", "ftp://x", 1),
			`line 4: agents[0].upstream: must be an http(s) URL, got "ftp://x"`},
		"a missing key, on its parent's line": {strings.Replace(one, "    max_data_classification: confidential\n", "", 1),
			"line 3: agents[0].max_data_classification: required"},
		"tls without its key": {one + "tls: {cert_file: c.pem}\n", "line 7: tls.key_file: required"},
		"client auth without a CA": {one + "tls: {cert_file: c, key_file: k, client_auth: require}\n",
			"line 7: tls.client_ca_file: required with client_auth require"},
		"unverified client certificates do not exist": {one + "tls: {cert_file: c, key_file: k, client_ca_file: ca, client_auth: request}\n",
			`tls.client_auth: must be none, verify_if_given or require, not "request"`},
		"log level": {one + "log: {level: loud}\n", `line 7: log.level: must be debug, info, warn or error, not "loud"`},
		"syntax":    {one + "  - : [\n", "line "},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %s", name, err, tc.want)
			continue
		}
		for _, goType := range []string{"config.", "time.Duration", "[]string", "struct", "int64", "unmarshal"} {
			if strings.Contains(err.Error(), goType) {
				t.Errorf("%s: %q names a Go type (%s)", name, err, goType)
			}
		}
	}
}

// TestLoadNamesFile: Load's problems read as a compiler's, one per line.
func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "writ.yaml")
	doc := strings.Replace(one, "upstream:", "upstrem:", 1) + "dry_run: maybe\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var ps *Problems
	if !errors.As(err, &ps) || len(ps.List) != 2 {
		t.Fatalf("got %v", err)
	}
	want := path + ":4: agents[0].upstrem: unknown key (did you mean upstream?)\n" +
		path + `:7: dry_run: must be true or false, not "maybe"`
	if err.Error() != want {
		t.Errorf("got\n%s\nwant\n%s", err, want)
	}
}

// TestEnvExpansion: ${NAME} and ${NAME:-default} in values, as OPA's config
// does; a plain value is typed by what it becomes, a quoted one stays a
// string; a value cannot add keys; an unset variable without a default is a
// problem naming the key.
func TestEnvExpansion(t *testing.T) {
	t.Setenv("WRIT_T_UPSTREAM", "http://127.0.0.1:9999")
	t.Setenv("WRIT_T_EMPTY", "")
	t.Setenv("WRIT_T_INJECT", "x\nadmin_pprof: true")
	doc := strings.Replace(one, "http://127.0.0.1:9000", "${WRIT_T_UPSTREAM}", 1) + `limits:
  max_body_bytes: ${WRIT_T_UNSET:-2048}
  read_timeout: ${WRIT_T_EMPTY:-7s}
admin: ${WRIT_T_UNSET:-127.0.0.1:1}
dry_run: ${WRIT_T_UNSET:-true}
default_classification: "${WRIT_T_UNSET:-public}"
agents_extra_comment: 1 # ${NOT_EXPANDED}
`
	doc = strings.Replace(doc, "agents_extra_comment: 1 # ${NOT_EXPANDED}\n", "# ${NOT_EXPANDED_IN_COMMENTS}\n", 1)
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if c.Agents[0].Upstream != "http://127.0.0.1:9999" || c.Limits.MaxBodyBytes != 2048 ||
		c.Limits.ReadTimeout != 7*time.Second || c.Admin != "127.0.0.1:1" || !c.DryRun || c.DefaultClassification != "public" {
		t.Errorf("expanded: %+v %+v", c.Agents[0], c.Limits)
	}
	c, err = Parse([]byte(strings.Replace(one, "name: my-agent", "name: ${WRIT_T_INJECT}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminPprof || c.Agents[0].Name != "x\nadmin_pprof: true" {
		t.Errorf("a variable's value added a key: %+v", c)
	}
	if v, err := expand("pa$$word $${LITERAL} ${WRIT_T_EMPTY:-d}", os.LookupEnv); err != nil || v != "pa$$word ${LITERAL} d" {
		t.Errorf("expand = %q, %v", v, err)
	}
	_, err = Parse([]byte(strings.Replace(one, "http://127.0.0.1:9000", "${WRIT_T_UNSET}", 1)))
	if err == nil || !strings.Contains(err.Error(), "line 4: agents[0].upstream: ${WRIT_T_UNSET}: WRIT_T_UNSET is not set") {
		t.Errorf("unset: %v", err)
	}
}

// TestWarnings: valid but doubtful configurations are named by key.
func TestWarnings(t *testing.T) {
	c, err := Parse([]byte(one))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 1 || w[0].Key != "identity" || !strings.Contains(w[0].Msg, "every caller is anonymous") {
		t.Errorf("no identity: %v", w)
	}
	c, err = Parse([]byte(one + "identity:\n  mtls: {trust_domain: bank.ae}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 1 || w[0].Key != "identity.mtls" || w[0].Line != 8 {
		t.Errorf("mtls without a verifying listener: %v", w)
	}
	c, err = Parse([]byte(one + "identity:\n  mtls: {trust_domain: bank.ae}\ntls: {cert_file: c, key_file: k, client_ca_file: ca}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 0 || c.TLS.Mode() != ClientAuthRequire {
		t.Errorf("mtls on a verifying listener: %v %s", w, c.TLS.Mode())
	}
	signed := strings.Replace(one, "    security_schemes: [oauth2]\n", "    security_schemes: [oauth2]\n    require_signed_card: true\n", 1)
	c, err = Parse([]byte(signed + "identity:\n  static_tokens_file: t\n"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, w := range c.Warnings() {
		keys = append(keys, w.Key)
	}
	if !slices.Contains(keys, "agents[0].require_signed_card") {
		t.Errorf("a signed card required, its keys not pinned: %v", keys)
	}
	c, err = Parse([]byte(strings.Replace(signed, "require_signed_card: true", "require_signed_card: true\n    card_keys: k.jwks", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range c.Warnings() {
		if w.Key == "agents[0].require_signed_card" {
			t.Errorf("pinned keys still warned: %v", w)
		}
	}
}

// TestDefaults: no policies key means the embedded policies; the admin
// listener is not on Prometheus's port.
func TestDefaultsOfFirstHour(t *testing.T) {
	c, err := Parse([]byte(one))
	if err != nil {
		t.Fatal(err)
	}
	if !c.EmbeddedPolicies() || c.Admin != "127.0.0.1:8477" || c.TLS != nil || c.Log.Level != "" {
		t.Errorf("defaults: %+v", c)
	}
}

// FuzzParse: any document is either a config or problems, never a panic,
// and no problem names a Go type.
func FuzzParse(f *testing.F) {
	f.Add([]byte(one))
	f.Add([]byte(strings.Replace(one, "upstream:", "upstrem:", 1) + "limits: {read_timeout: 5}\n"))
	f.Add([]byte("agents: [{name: ${X:-a}, upstream: '${Y}'}]\ntls: {client_auth: x}\n"))
	f.Add([]byte("limits: [1, 2]\nlog: 5\npolicies: {a: b}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, err := Parse(doc)
		if err == nil {
			return
		}
		var ps *Problems
		if !errors.As(err, &ps) {
			t.Fatalf("not *Problems: %v", err)
		}
		for _, goType := range []string{"config.", "time.Duration", "[]string", "int64", "unmarshal !!"} {
			if strings.Contains(err.Error(), goType) {
				t.Fatalf("%q names a Go type (%s)", err, goType)
			}
		}
	})
}
