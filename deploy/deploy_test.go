// Package deploy_test keeps the deployment artifacts honest without a cluster,
// a Prometheus or a Grafana: every file is parsed strictly, every writ_ metric
// a dashboard panel or an alert reads exists in package metrics (with the
// labels it has), the Kubernetes config passes config.Parse and loads its
// policies from the ConfigMap as the kubelet mounts it, the container ports are
// the config's, and the probes hit real admin paths.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/writ-authz/writ/internal/kubecheck"
	"github.com/writ-authz/writ/internal/mdlinks"
	"github.com/writ-authz/writ/metrics"
)

var update = flag.Bool("update", false, "regenerate kubernetes/policies.yaml from ../policies")

const (
	sidecarFile   = "kubernetes/sidecar.yaml"
	policiesFile  = "kubernetes/policies.yaml"
	dashboardFile = "grafana/writ-dashboard.json"
	alertsFile    = "prometheus/writ-alerts.yaml"
	shipped       = "../policies"
)

// ---- metric names and labels ----

// familyLabels are the labels of each writ_ family (metrics/metrics.go).
// Families missing here have their names checked, not their labels.
var familyLabels = map[string][]string{
	"writ_decisions_total":                    {"route", "operation", "result", "mode", "tenant"},
	"writ_denials_total":                      {"route", "operation", "code"},
	"writ_decision_duration_seconds":          {"mode", "cache"},
	"writ_request_duration_seconds":           {"route", "operation", "mode"},
	"writ_requests_total":                     {"route", "operation", "status", "mode"},
	"writ_upstream_duration_seconds":          {"route"},
	"writ_upstream_errors_total":              {},
	"writ_upstream_invalid_responses_total":   {},
	"writ_decision_cache_hits_total":          {},
	"writ_decision_cache_misses_total":        {},
	"writ_token_cache_hits_total":             {},
	"writ_token_cache_misses_total":           {},
	"writ_tasks":                              {"state"},
	"writ_task_transitions_total":             {"from", "to"},
	"writ_tasks_created_total":                {},
	"writ_protocol_violations_total":          {"route"},
	"writ_push_deliveries_total":              {"result"},
	"writ_push_attempts_total":                {"result"},
	"writ_push_delivery_duration_seconds":     {},
	"writ_push_queue_depth":                   {},
	"writ_push_dropped_total":                 {},
	"writ_push_guard_refusals_total":          {"reason"},
	"writ_policy_reloads_total":               {"result"},
	"writ_policy_info":                        {"revision"},
	"writ_extauthz_checks_total":              {"result"},
	"writ_store_errors_total":                 {},
	"writ_store_cancellations_total":          {},
	"writ_task_evictions_total":               {"reason"},
	"writ_component_errors_total":             {"component"},
	"writ_token_exchanges_total":              {"outcome", "error"},
	"writ_token_exchange_duration_seconds":    {"outcome"},
	"writ_shadow_disagreements_total":         {"code", "direction"},
	"writ_shadow_evaluations_total":           {"result"},
	"writ_decision_log_uploads_total":         {"result"},
	"writ_decision_log_upload_dropped_total":  {"reason"},
	"writ_decision_log_upload_buffered_bytes": {},
}

// labelValues are the values a bounded label takes, per family.
var labelValues = map[string]map[string][]string{
	"writ_decisions_total":                   {"result": {"allow", "deny", "dry_run", "error"}, "mode": {"sidecar", "ext_authz", "ext_proc"}},
	"writ_decision_duration_seconds":         {"cache": {"hit", "miss"}, "mode": {"sidecar", "ext_authz", "ext_proc"}},
	"writ_task_evictions_total":              {"reason": {"store_full", "owner_full"}},
	"writ_push_deliveries_total":             {"result": {"delivered", "failed"}},
	"writ_push_attempts_total":               {"result": {"delivered", "retry", "failed"}},
	"writ_policy_reloads_total":              {"result": {"ok", "failed"}},
	"writ_extauthz_checks_total":             {"result": {"allow", "deny"}},
	"writ_token_exchanges_total":             {"outcome": {"issued", "cache_hit", "failed"}},
	"writ_shadow_evaluations_total":          {"result": {"agree", "disagree", "error", "dropped"}},
	"writ_shadow_disagreements_total":        {"direction": {"allow_to_deny", "deny_to_allow", "codes", "other"}},
	"writ_decision_log_uploads_total":        {"result": {"uploaded", "failed"}},
	"writ_decision_log_upload_dropped_total": {"reason": {"queue", "buffer", "failed"}},
}

// targetLabels are added by Prometheus to every series it scrapes.
var targetLabels = []string{"job", "instance", "namespace", "pod"}

var (
	metricRE  = regexp.MustCompile(`\bwrit_[a-zA-Z0-9_]+`)
	selectRE  = regexp.MustCompile(`\b(writ_[a-zA-Z0-9_]+)\s*\{([^}]*)\}`)
	matcherRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupRE   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// family strips a histogram's series suffix from a metric name.
func family(name string) (fam string, histogramPart bool) {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, s); ok {
			return f, true
		}
	}
	return name, false
}

// checkExpr checks one PromQL expression against the metrics package: every
// writ_ name is a family of metrics.Names() (a _bucket/_sum/_count only of a
// histogram), every label it selects or groups by is one the families have,
// and bounded labels are matched only against values they take. It returns
// the families used.
func checkExpr(t *testing.T, where, expr string) []string {
	t.Helper()
	known := metrics.Names()
	if err := balanced(expr); err != nil {
		t.Errorf("%s: %v in %s", where, err, expr)
	}
	var used []string
	allowed := slices.Clone(targetLabels)
	for _, name := range metricRE.FindAllString(expr, -1) {
		fam, hist := family(name)
		if !slices.Contains(known, fam) {
			t.Errorf("%s: %s is not a metric of package metrics (metrics.Names())", where, name)
			continue
		}
		if hist && !strings.HasSuffix(fam, "_seconds") {
			t.Errorf("%s: %s: %s is not a histogram", where, name, fam)
		}
		if hist {
			allowed = append(allowed, "le")
		}
		used = append(used, fam)
		allowed = append(allowed, familyLabels[fam]...)
	}
	for _, m := range selectRE.FindAllStringSubmatch(expr, -1) {
		fam, hist := family(m[1])
		labels, ok := familyLabels[fam]
		if !ok {
			continue
		}
		for _, lm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
			name, op, value := lm[1], lm[2], lm[3]
			if !slices.Contains(labels, name) && !slices.Contains(targetLabels, name) && !(hist && name == "le") {
				t.Errorf("%s: %s has no label %q (it has %v)", where, fam, name, labels)
			}
			if vals := labelValues[fam][name]; vals != nil && op == "=" && !slices.Contains(vals, value) {
				t.Errorf("%s: %s{%s=%q}: %s is one of %v", where, fam, name, value, name, vals)
			}
		}
	}
	if len(used) > 0 {
		for _, g := range groupRE.FindAllStringSubmatch(expr, -1) {
			for l := range strings.SplitSeq(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(allowed, l) {
					t.Errorf("%s: groups by %q, a label none of %v has", where, l, used)
				}
			}
		}
	}
	return used
}

// balanced checks that the brackets and quotes of an expression pair up.
func balanced(expr string) error {
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inQuote := false
	for _, r := range expr {
		switch {
		case r == '"':
			inQuote = !inQuote
		case inQuote:
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return fmt.Errorf("unbalanced %q", r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inQuote || len(stack) > 0 {
		return errors.New("unclosed bracket or quote")
	}
	return nil
}

// TestFamilyTableMatchesMetrics: the label table above names only real families.
func TestFamilyTableMatchesMetrics(t *testing.T) {
	known := metrics.Names()
	for fam := range familyLabels {
		if !slices.Contains(known, fam) {
			t.Errorf("%s is not in metrics.Names() %v", fam, known)
		}
	}
}

// ---- Grafana ----

type dashboard struct {
	// Inputs and Requires are what Grafana's import asks for and checks
	// (Dashboards > New > Import).
	Inputs []struct {
		Name, Label, Type, PluginID string
	} `json:"__inputs"`
	Requires []struct {
		Type, ID string
	} `json:"__requires"`
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name    string          `json:"name"`
			Type    string          `json:"type"`
			Query   json.RawMessage `json:"query"`
			Current struct {
				Value string `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// TestDashboard: every panel is well formed and placed, reads the templated
// Prometheus data source, uses only real metrics and labels, and together the
// panels cover every writ_ family.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Errorf("variable %s: %v", v.Name, err)
			}
			checkExpr(t, "variable "+v.Name, q.Query)
		}
	}
	for _, v := range []string{"datasource", "job", "route"} {
		if !vars[v] {
			t.Errorf("no template variable %q", v)
		}
	}
	// Importable: one Prometheus input, which the datasource variable
	// defaults to, and every panel type the dashboard uses required.
	if len(d.Inputs) != 1 || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs %+v: want the one Prometheus data source", d.Inputs)
	} else {
		for _, v := range d.Templating.List {
			if v.Name == "datasource" && v.Current.Value != "${"+d.Inputs[0].Name+"}" {
				t.Errorf("the datasource variable defaults to %q, not the imported ${%s}", v.Current.Value, d.Inputs[0].Name)
			}
		}
	}
	required := map[string]bool{}
	for _, r := range d.Requires {
		required[r.Type+"/"+r.ID] = true
	}
	for _, p := range d.Panels {
		if p.Type != "row" && !required["panel/"+p.Type] {
			t.Errorf("__requires lacks panel %s", p.Type)
		}
	}
	if !required["datasource/prometheus"] || !required["grafana/grafana"] {
		t.Errorf("__requires %+v: want grafana and the prometheus data source", d.Requires)
	}
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	ids := map[int]bool{}
	covered := map[string]bool{}
	var titles []string
	type cell struct{ x, y int }
	taken := map[cell]int{}
	for _, p := range all {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("%s: id missing or used twice", where)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24-column grid", where, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("%s overlaps panel %d at (%d,%d)", where, other, x, y)
				}
				taken[cell{x, y}] = p.ID
			}
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource must be the templated Prometheus one", where)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no targets", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: a target without expr or with a duplicate refId %q", where, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, v := range regexp.MustCompile(`\$(\w+)`).FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[v[1]] && !strings.HasPrefix(v[1], "__") {
					t.Errorf("%s: $%s is not a template variable", where, v[1])
				}
			}
			for _, f := range checkExpr(t, where, tg.Expr) {
				covered[f] = true
			}
		}
	}
	for _, f := range metrics.Names() {
		if !covered[f] {
			t.Errorf("no panel shows %s", f)
		}
	}
	// The panels the issue asks for.
	for _, want := range []string{"Decisions by result", "Denials by code", "Decision latency", "Cache hit ratio",
		"Requests by status", "Upstream latency", "Tasks by state", "Protocol violations", "Push deliveries",
		"Push queue", "Push guard refusals", "Policy revision", "Policy reloads"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
	// Decision latency shows p50 and p99 from the histogram's buckets.
	var lat string
	for _, p := range all {
		if p.Title == "Decision latency" {
			for _, tg := range p.Targets {
				lat += tg.Expr + "\n"
			}
		}
	}
	for _, q := range []string{"histogram_quantile(0.5,", "histogram_quantile(0.99,", "writ_decision_duration_seconds_bucket"} {
		if !strings.Contains(lat, q) {
			t.Errorf("decision latency panel lacks %s", q)
		}
	}
}

// ---- Prometheus ----

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(t *testing.T) map[string]rule {
	t.Helper()
	var f ruleFile
	decodeStrict(t, alertsFile, &f)
	rules := map[string]rule{}
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: a group needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			if _, dup := rules[r.Alert]; dup || !strings.HasPrefix(r.Alert, "Writ") {
				t.Errorf("alert %q: name missing, not Writ…, or used twice", r.Alert)
			}
			rules[r.Alert] = r
		}
	}
	return rules
}

// TestAlertRules: every rule is complete and reads only real metrics and
// labels; the alerts the issue asks for exist; the queue threshold is the
// Kubernetes config's push.queue_size.
func TestAlertRules(t *testing.T) {
	rules := loadAlerts(t)
	for name, r := range rules {
		where := "alert " + name
		if strings.TrimSpace(r.Expr) == "" || r.Annotations["summary"] == "" {
			t.Errorf("%s: needs an expr and a summary", where)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q", where, s)
		}
		if r.For != "" {
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q", where, r.For)
			}
		}
		if len(checkExpr(t, where, r.Expr)) == 0 && !strings.HasPrefix(strings.TrimSpace(r.Expr), "up{") {
			t.Errorf("%s: reads no writ_ metric", where)
		}
		// A runbook for every alert: its heading is the alert's name.
		anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbooksURL+"#")
		if !ok || anchor != strings.ToLower(name) {
			t.Errorf("%s: runbook_url %q, want %s#%s", where, r.Annotations["runbook_url"], runbooksURL, strings.ToLower(name))
		} else if !slices.Contains(runbookAnchors(t), anchor) {
			t.Errorf("%s: %s has no section #%s (a heading \"## %s\")", where, runbooksPage, anchor, name)
		}
	}
	want := map[string]string{ // alert → a metric it must read
		"WritDenyRateSpike":       "writ_decisions_total",
		"WritPolicyReloadFailed":  "writ_policy_reloads_total",
		"WritPushQueueSaturation": "writ_push_queue_depth",
		"WritPushDropped":         "writ_push_dropped_total",
		"WritProtocolViolations":  "writ_protocol_violations_total",
		"WritDecisionLatencyHigh": "writ_decision_duration_seconds_bucket",
		"WritTargetDown":          "up{",
		"WritAbsent":              "absent(writ_policy_info)",
	}
	for name, m := range want {
		if r, ok := rules[name]; !ok || !strings.Contains(r.Expr, m) {
			t.Errorf("no alert %s on %s", name, m)
		}
	}
	if !strings.Contains(rules["WritDecisionLatencyHigh"].Expr, "histogram_quantile(0.99,") {
		t.Error("WritDecisionLatencyHigh must alert on p99")
	}
	cfg := staticSidecar(t).Cfg
	m := regexp.MustCompile(`writ_push_queue_depth\)\s*>\s*([0-9.]+)\s*\*\s*([0-9]+)`).FindStringSubmatch(rules["WritPushQueueSaturation"].Expr)
	if m == nil {
		t.Fatalf("WritPushQueueSaturation: want `depth > FRACTION * QUEUE_SIZE`: %s", rules["WritPushQueueSaturation"].Expr)
	}
	frac, _ := strconv.ParseFloat(m[1], 64)
	size, _ := strconv.Atoi(m[2])
	if size != cfg.Push.QueueSize || frac <= 0.5 || frac >= 1 {
		t.Errorf("WritPushQueueSaturation at %s × %d; the sidecar's push.queue_size is %d", m[1], size, cfg.Push.QueueSize)
	}
}

// ---- the policies ConfigMap ----

// shippedPolicies reads every file writ loads from ../policies.
func shippedPolicies(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(shipped)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); e.IsDir() || (ext != ".rego" && ext != ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(shipped, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(raw)
	}
	return out
}

const policiesHeader = `The shipped policies (policies/*.rego and data.json) as the ConfigMap that
deploy/kubernetes/sidecar.yaml mounts. Generated: edit policies/, then run
  go test ./deploy -run TestPoliciesConfigMap -update
(deploy/deploy_test.go fails while this file and policies/ differ).`

// renderPolicies renders the ConfigMap with each file as a literal block.
func renderPolicies(t *testing.T, files map[string]string) []byte {
	t.Helper()
	data := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data.Content = append(data.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: name},
			&yaml.Node{Kind: yaml.ScalarNode, Value: files[name], Style: yaml.LiteralStyle})
	}
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	doc := &yaml.Node{Kind: yaml.MappingNode, HeadComment: policiesHeader, Content: []*yaml.Node{
		str("apiVersion"), str("v1"),
		str("kind"), str("ConfigMap"),
		str("metadata"), {Kind: yaml.MappingNode, Content: []*yaml.Node{
			str("name"), str("writ-policies"),
			str("labels"), {Kind: yaml.MappingNode, Content: []*yaml.Node{
				str("app.kubernetes.io/name"), str("writ"),
			}},
		}},
		str("data"), data,
	}}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPoliciesConfigMap: policies.yaml holds exactly the shipped policies, and
// writ.yaml lists exactly its files where the pod mounts them.
func TestPoliciesConfigMap(t *testing.T) {
	files := shippedPolicies(t)
	if *update {
		if err := os.WriteFile(policiesFile, renderPolicies(t, files), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cm := kubecheck.DecodeFile(t, policiesFile).ConfigMaps["writ-policies"]
	if cm == nil {
		t.Fatalf("%s has no ConfigMap writ-policies", policiesFile)
	}
	if !maps.Equal(cm.Data, files) {
		for _, k := range slices.Sorted(maps.Keys(files)) {
			if cm.Data[k] != files[k] {
				t.Errorf("%s differs from policies/%s", policiesFile, k)
			}
		}
		for k := range cm.Data {
			if _, ok := files[k]; !ok {
				t.Errorf("%s has %s, which policies/ does not", policiesFile, k)
			}
		}
		t.Fatal("regenerate: go test ./deploy -run TestPoliciesConfigMap -update")
	}
	kubecheck.PolicyList(t, staticSidecar(t), cm.Data)
}

// TestPoliciesFromConfigMapVolume: writ.yaml's policy list loads, tests and all,
// from writ-policies laid out as the kubelet mounts it, and an update of the
// ConfigMap (the kubelet's ..data swap) is picked up by the policy watcher.
func TestPoliciesFromConfigMapVolume(t *testing.T) {
	kubecheck.PoliciesLoad(t, staticSidecar(t), kubecheck.DecodeFile(t, policiesFile).ConfigMaps["writ-policies"].Data)
}

// ---- Kubernetes: sidecar.yaml, decoded into k8s.io/api types ----

func staticSidecar(t *testing.T) *kubecheck.Sidecar {
	t.Helper()
	return kubecheck.NewSidecar(t, kubecheck.DecodeFile(t, sidecarFile))
}

// TestSidecarConfig: writ.yaml passes config.Parse; both containers read it
// from the ConfigMap; writ listens on the ports the pod declares; the agent
// is reached over the pod's loopback only; the Service exposes writ's
// listener and nothing else; the NetworkPolicy admits admin from one
// namespace only (kubecheck.Config; deploy/helm runs it on the chart).
func TestSidecarConfig(t *testing.T) { kubecheck.Config(t, staticSidecar(t)) }

// TestSidecarAgentCannotReadRecords: the agent in writ's pod reaches the
// admin port on the pod's loopback; the admin API built from the manifest's
// writ.yaml refuses it the operator routes, and the admin token is on a
// Secret only writ's containers mount (kubecheck.AdminAccess).
//
// Threat: the protected agent, or whoever controls it, reads every caller's
// task records (owners, chains, push hosts) or reloads the policy through
// writ's admin port, which it shares a network namespace with. Defence: the
// operator routes need a bearer token from admin_token_file, mounted from a
// Secret into writ's containers only; probes and /metrics stay open.
func TestSidecarAgentCannotReadRecords(t *testing.T) { kubecheck.AdminAccess(t, staticSidecar(t)) }

// TestSidecarStore: the file store on a writable disk volume sized for
// lifecycle.max_tasks (kubecheck.Store).
func TestSidecarStore(t *testing.T) { kubecheck.Store(t, staticSidecar(t)) }

// TestSidecarProbes: HTTP GETs on the admin port at paths the admin API
// serves (kubecheck.Probes).
func TestSidecarProbes(t *testing.T) { kubecheck.Probes(t, staticSidecar(t)) }

// TestSidecarResources: measured requests, limits above them, GOMEMLIMIT
// under the memory limit, hardened containers (kubecheck.Resources).
func TestSidecarResources(t *testing.T) { kubecheck.Resources(t, staticSidecar(t)) }

// decodeStrict decodes a one-document YAML file, refusing unknown fields.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// runbooksPage is the page of the runbooks, from this directory, and
// runbooksURL where it is published (alert annotations link into it).
const (
	runbooksPage = "../docs/runbooks.md"
	runbooksURL  = "https://github.com/writ-authz/writ/blob/main/docs/runbooks.md"
)

// runbookAnchors are the anchors of the runbooks page's headings as GitHub
// makes them (mdlinks: the rule the documents' link test uses too).
func runbookAnchors(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(runbooksPage)
	if err != nil {
		t.Fatal(err)
	}
	return mdlinks.Anchors(raw)
}
