package policies_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/policies"
)

// limit is one limit of data.writ.config as the policies publish it
// (data.writ.authz.limits, beside the check that reads it).
type limit struct {
	Range string `json:"range"`
	Ends  []any  `json:"ends"`
}

// publishedLimits are the ranges the shipped policies publish: the one place
// the tests below take them from.
func publishedLimits(t *testing.T) map[string]limit {
	t.Helper()
	rs, err := rego.New(rego.Query("data.writ.authz.limits"), rego.Load([]string{"."}, nil)).Eval(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("data.writ.authz.limits: %v %v", rs, err)
	}
	raw, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]limit
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// shippedData is data.json.
func shippedData(t *testing.T) map[string]any {
	t.Helper()
	raw, err := policies.FS.ReadFile("data.json")
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	return data
}

func configOf(data map[string]any) map[string]any {
	return data["writ"].(map[string]any)["config"].(map[string]any)
}

// withConfig writes the shipped policies to a directory of their own, with
// data.json's writ.config changed by set.
func withConfig(t *testing.T, set func(cfg map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, policies.FS); err != nil {
		t.Fatal(err)
	}
	data := shippedData(t)
	set(configOf(data))
	raw, err := json.MarshalIndent(data, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestEveryLimitHasARange: every key of data.json's writ.config has a
// published range and ends, and every published range a key in data.json, so
// a new limit cannot ship without a range the test below then holds the
// shipped tests to.
func TestEveryLimitHasARange(t *testing.T) {
	limits := publishedLimits(t)
	keys := slices.Sorted(maps.Keys(configOf(shippedData(t))))
	if published := slices.Sorted(maps.Keys(limits)); !slices.Equal(keys, published) {
		t.Fatalf("data.json's limits %v, published ranges %v", keys, published)
	}
	for key, l := range limits {
		if l.Range == "" || len(l.Ends) == 0 {
			t.Errorf("%s: range %q, ends %v", key, l.Range, l.Ends)
		}
	}
}

// TestShippedTestsHoldAtEveryEndOfEveryLimit: with each limit of data.json at
// each end of its documented range (the others as shipped), and with every
// limit at its least and at its most at once, every shipped Rego test passes
// through the engine `writ policy test` and a reload run (and through the
// stock opa CLI, when make opa has built it into .tools/): a compliance
// change inside the ranges never needs a test edited.
func TestShippedTestsHoldAtEveryEndOfEveryLimit(t *testing.T) {
	limits := publishedLimits(t)
	_, shipped, err := authz.TestPolicies(context.Background(), []string{withConfig(t, func(map[string]any) {})})
	if err != nil || shipped.Passed == 0 {
		t.Fatalf("the shipped set: %+v %v", shipped, err)
	}
	type variant struct {
		name string
		set  func(cfg map[string]any)
	}
	var variants []variant
	for _, key := range slices.Sorted(maps.Keys(limits)) {
		for i, end := range limits[key].Ends {
			variants = append(variants, variant{fmt.Sprintf("%s/end%d", key, i), func(cfg map[string]any) { cfg[key] = end }})
		}
	}
	variants = append(variants,
		variant{"every limit at its least", func(cfg map[string]any) {
			for key, l := range limits {
				cfg[key] = l.Ends[0]
			}
		}},
		variant{"every limit at its most", func(cfg map[string]any) {
			for key, l := range limits {
				cfg[key] = l.Ends[len(l.Ends)-1]
			}
		}})
	opa, err := filepath.Abs("../.tools/opa")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(opa); err != nil {
		t.Logf("no stock opa CLI at %s (make opa builds it): checking through writ's engine only", opa)
		opa = ""
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := withConfig(t, v.set)
			results, sum, err := authz.TestPolicies(context.Background(), []string{dir})
			if err != nil || sum.Passed != shipped.Passed {
				for _, r := range results {
					if !r.Pass {
						t.Errorf("%s.%s (%s) %s: %s%s", r.Package, r.Name, r.Location, r.FailedAt, r.Err, r.Output)
					}
				}
				t.Fatalf("%d of %d passed: %v", sum.Passed, shipped.Passed, err)
			}
			if opa == "" {
				return
			}
			if out, err := exec.Command(opa, "test", dir).CombinedOutput(); err != nil {
				t.Fatalf("opa test: %v\n%s", err, out)
			}
		})
	}
}

// TestLimitOutsideItsRangeIsRefused: data.json with a limit outside its range
// (or a key no check reads) fails the shipped range test, so the set is
// refused at load and on reload, with a message naming the key and its
// range.
//
// Threat: a compliance edit that silently weakens or breaks the policy (a
// misspelt key ignored, a callback host that can never match, an ownership
// mode that matches nobody, a depth of 0 that denies every delegation) goes
// live on the next reload. Defence: every limit has a documented range that
// the set's own tests check, and they gate every load.
func TestLimitOutsideItsRangeIsRefused(t *testing.T) {
	limits := publishedLimits(t)
	for name, c := range map[string]struct {
		key   string
		value any
	}{
		"depth 0":                 {"max_delegation_depth", 0},
		"depth 17":                {"max_delegation_depth", 17},
		"depth as text":           {"max_delegation_depth", "4"},
		"an order out of order":   {"classification_order", []any{"restricted", "public"}},
		"an unknown scheme":       {"accepted_auth_schemes", []any{"kerberos"}},
		"mtls taking a jwt":       {"auth_methods", map[string]any{"oauth2": []any{"jwt"}, "openidconnect": []any{"jwt"}, "mtls": []any{"jwt"}}},
		"a misspelt operation":    {"required_scopes", map[string]any{"sned": []any{"delegate"}}},
		"an unknown mode":         {"ownership", "team"},
		"an upper-case host":      {"callbacks", map[string]any{"targets": map[string]any{"a": []any{"Hooks.bank.ae"}}}},
		"a key no check reads":    {"max_delegation_dept", 2},
		"a wildcard for a tenant": {"callbacks", map[string]any{"tenants": map[string]any{"w": []any{"*.bank.ae"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := withConfig(t, func(cfg map[string]any) { cfg[c.key] = c.value })
			_, err := authz.LoadPolicy(context.Background(), []string{dir}, authz.LoadOptions{})
			if !errors.Is(err, authz.ErrPolicyTests) || !strings.Contains(err.Error(), "test_data_is_within_its_documented_range") ||
				!strings.Contains(err.Error(), "data.writ.config."+c.key) {
				t.Fatalf("loaded, or refused for another reason: %v", err)
			}
			if l, ok := limits[c.key]; ok && !strings.Contains(err.Error(), l.Range) && c.key != "callbacks" {
				t.Errorf("the error does not say the range %q: %v", l.Range, err)
			}
		})
	}
}

// TestLimitsAreDocumented: the policy authoring page states every published
// range word for word.
func TestLimitsAreDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/policy-authoring.md")
	if err != nil {
		t.Fatal(err)
	}
	for key, l := range publishedLimits(t) {
		if !strings.Contains(string(raw), "`"+key+"`") || !strings.Contains(string(raw), l.Range) {
			t.Errorf("docs/policy-authoring.md does not give %s its range %q", key, l.Range)
		}
	}
}
