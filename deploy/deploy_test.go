// Package deploy_test keeps the deployment artifacts honest without a cluster,
// a Prometheus or a Grafana: every file is parsed strictly, every writ_ metric
// a dashboard panel or an alert reads exists in package metrics (with the
// labels it has), the Kubernetes config passes config.Parse and loads its
// policies from the ConfigMap as the kubelet mounts it, the container ports are
// the config's, and the probes hit real admin paths.
package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/writ-authz/writ/admin"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
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
	"writ_decisions_total":                  {"route", "operation", "result", "mode", "tenant"},
	"writ_denials_total":                    {"route", "operation", "code"},
	"writ_decision_duration_seconds":        {"mode", "cache"},
	"writ_request_duration_seconds":         {"route", "operation", "mode"},
	"writ_requests_total":                   {"route", "operation", "status", "mode"},
	"writ_upstream_duration_seconds":        {"route"},
	"writ_upstream_errors_total":            {},
	"writ_upstream_invalid_responses_total": {},
	"writ_decision_cache_hits_total":        {},
	"writ_decision_cache_misses_total":      {},
	"writ_token_cache_hits_total":           {},
	"writ_token_cache_misses_total":         {},
	"writ_tasks":                            {"state"},
	"writ_task_transitions_total":           {"from", "to"},
	"writ_tasks_created_total":              {},
	"writ_protocol_violations_total":        {"route"},
	"writ_push_deliveries_total":            {"result"},
	"writ_push_attempts_total":              {"result"},
	"writ_push_delivery_duration_seconds":   {},
	"writ_push_queue_depth":                 {},
	"writ_push_dropped_total":               {},
	"writ_push_guard_refusals_total":        {"reason"},
	"writ_policy_reloads_total":             {"result"},
	"writ_policy_info":                      {"revision"},
	"writ_extauthz_checks_total":            {"result"},
	"writ_store_errors_total":               {},
	"writ_task_evictions_total":             {"reason"},
}

// labelValues are the values a bounded label takes, per family.
var labelValues = map[string]map[string][]string{
	"writ_decisions_total":           {"result": {"allow", "deny", "dry_run", "error"}, "mode": {"sidecar", "ext_authz", "ext_proc"}},
	"writ_decision_duration_seconds": {"cache": {"hit", "miss"}, "mode": {"sidecar", "ext_authz", "ext_proc"}},
	"writ_task_evictions_total":      {"reason": {"store_full", "owner_full"}},
	"writ_push_deliveries_total":     {"result": {"delivered", "failed"}},
	"writ_push_attempts_total":       {"result": {"delivered", "retry", "failed"}},
	"writ_policy_reloads_total":      {"result": {"ok", "failed"}},
	"writ_extauthz_checks_total":     {"result": {"allow", "deny"}},
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
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
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
		if len(checkExpr(t, where, r.Expr)) == 0 {
			t.Errorf("%s: reads no writ_ metric", where)
		}
	}
	want := map[string]string{ // alert → a metric it must read
		"WritDenyRateSpike":       "writ_decisions_total",
		"WritPolicyReloadFailed":  "writ_policy_reloads_total",
		"WritPushQueueSaturation": "writ_push_queue_depth",
		"WritPushDropped":         "writ_push_dropped_total",
		"WritProtocolViolations":  "writ_protocol_violations_total",
		"WritDecisionLatencyHigh": "writ_decision_duration_seconds_bucket",
	}
	for name, m := range want {
		if r, ok := rules[name]; !ok || !strings.Contains(r.Expr, m) {
			t.Errorf("no alert %s on %s", name, m)
		}
	}
	if !strings.Contains(rules["WritDecisionLatencyHigh"].Expr, "histogram_quantile(0.99,") {
		t.Error("WritDecisionLatencyHigh must alert on p99")
	}
	cfg := sidecarConfig(t, loadSidecar(t))
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

// ---- Kubernetes ----

// The parts of the Kubernetes objects sidecar.yaml uses, decoded strictly: a
// misspelt or misplaced field fails the test as it would fail the API server's
// strict validation.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   meta   `yaml:"metadata"`
	Data       map[string]string
	Spec       yaml.Node
}

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type deploymentSpec struct {
	Replicas int `yaml:"replicas"`
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata meta    `yaml:"metadata"`
		Spec     podSpec `yaml:"spec"`
	} `yaml:"template"`
}

type podSpec struct {
	AutomountServiceAccountToken  *bool       `yaml:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               podSecurity `yaml:"securityContext"`
	InitContainers                []container `yaml:"initContainers"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []volume    `yaml:"volumes"`
}

type podSecurity struct {
	RunAsNonRoot   bool              `yaml:"runAsNonRoot"`
	RunAsUser      int               `yaml:"runAsUser"`
	RunAsGroup     int               `yaml:"runAsGroup"`
	SeccompProfile map[string]string `yaml:"seccompProfile"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
		Protocol      string `yaml:"protocol"`
	} `yaml:"ports"`
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"` // a container port's name
	} `yaml:"httpGet"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
	EmptyDir *struct {
		Medium    string `yaml:"medium"`
		SizeLimit string `yaml:"sizeLimit"`
	} `yaml:"emptyDir"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
		Protocol   string `yaml:"protocol"`
	} `yaml:"ports"`
}

type networkPolicySpec struct {
	PodSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"podSelector"`
	PolicyTypes []string `yaml:"policyTypes"`
	Ingress     []struct {
		Ports []struct {
			Port     string `yaml:"port"`
			Protocol string `yaml:"protocol"`
		} `yaml:"ports"`
		From []struct {
			NamespaceSelector *struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"namespaceSelector"`
		} `yaml:"from"`
	} `yaml:"ingress"`
}

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

// loadObjects decodes every document of a multi-document YAML file.
func loadObjects(t *testing.T, path string) []object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var out []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: a document without apiVersion, kind or name", path)
		}
		out = append(out, o)
	}
}

func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && (name == "" || o.Metadata.Name == name) {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return object{}
}

// spec decodes an object's spec strictly.
func spec[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	raw, err := yaml.Marshal(&o.Spec)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s %s spec: %v", o.Kind, o.Metadata.Name, err)
	}
	return v
}

// sidecar is sidecar.yaml's objects, decoded.
type sidecar struct {
	objs       []object
	deployment deploymentSpec
	pod        podSpec
	writ       container
	agent      container
	validate   container
}

func loadSidecar(t *testing.T) sidecar {
	t.Helper()
	s := sidecar{objs: loadObjects(t, sidecarFile)}
	s.deployment = spec[deploymentSpec](t, find(t, s.objs, "Deployment", ""))
	s.pod = s.deployment.Template.Spec
	byName := func(cs []container, name string) container {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no container %q", name)
		return container{}
	}
	s.writ = byName(s.pod.Containers, "writ")
	s.agent = byName(s.pod.Containers, "agent")
	s.validate = byName(s.pod.InitContainers, "writ-validate")
	return s
}

// sidecarConfig is the ConfigMap's writ.yaml through config.Parse.
func sidecarConfig(t *testing.T, s sidecar) *config.Config {
	t.Helper()
	raw, ok := find(t, s.objs, "ConfigMap", "writ-config").Data["writ.yaml"]
	if !ok {
		t.Fatal("ConfigMap writ-config has no writ.yaml")
	}
	cfg, err := config.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("writ-config writ.yaml: %v", err)
	}
	return cfg
}

// mountOf is where container c mounts the volume backed by ConfigMap cm.
func mountOf(t *testing.T, s sidecar, c container, cm string) string {
	t.Helper()
	for _, v := range s.pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != cm {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				if !m.ReadOnly {
					t.Errorf("container %s mounts %s writable", c.Name, cm)
				}
				return m.MountPath
			}
		}
	}
	t.Fatalf("container %s does not mount ConfigMap %s", c.Name, cm)
	return ""
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if (a == "-"+name || a == "--"+name) && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v
		}
	}
	return ""
}

func portOf(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, n
}

// containerPort is the port number of c's port called name.
func containerPort(c container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// TestSidecarConfig: the ConfigMap's writ.yaml passes config.Parse; both
// containers read it from the ConfigMap; writ listens on the ports the pod
// declares; the agent is reached over the pod's loopback only.
func TestSidecarConfig(t *testing.T) {
	s := loadSidecar(t)
	cfg := sidecarConfig(t, s)
	for _, c := range []container{s.writ, s.validate} {
		want := mountOf(t, s, c, "writ-config") + "/writ.yaml"
		if got := flagValue(c.Args, "config"); got != want {
			t.Errorf("%s: -config %q, the ConfigMap is mounted as %s", c.Name, got, want)
		}
	}
	if s.validate.Args[0] != "validate" || s.writ.Args[0] != "serve" || s.validate.Image != s.writ.Image {
		t.Errorf("init container %v (%s) must validate with writ's image (%s, %v)", s.validate.Args, s.validate.Image, s.writ.Image, s.writ.Args)
	}
	if mountOf(t, s, s.validate, "writ-policies") != mountOf(t, s, s.writ, "writ-policies") {
		t.Error("writ-validate must see the policies where writ does")
	}
	for key, addr := range map[string]string{"http": cfg.Listen, "admin": cfg.Admin} {
		host, port := portOf(t, addr)
		if got := containerPort(s.writ, key); got != port {
			t.Errorf("container port %s is %d, writ.yaml says %s", key, got, addr)
		}
		// The kubelet and Prometheus connect to the pod IP.
		if host != "0.0.0.0" && host != "" {
			t.Errorf("%s %s: the probes and the Service reach the pod IP, not %s", key, addr, host)
		}
	}
	if len(cfg.Agents) != 1 {
		t.Fatalf("a sidecar fronts one agent, not %d", len(cfg.Agents))
	}
	u, _ := url.Parse(cfg.Agents[0].Upstream)
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Errorf("upstream %s: the agent is in the pod, at 127.0.0.1", cfg.Agents[0].Upstream)
	}
	if len(s.agent.Ports) != 0 {
		t.Error("the agent declares ports: nothing outside the pod may reach it")
	}
	for _, e := range s.agent.Env {
		if strings.Contains(e.Value, ":") && !strings.Contains(e.Value, u.Host) {
			t.Errorf("agent env %s=%s: the agent listens on %s", e.Name, e.Value, u.Host)
		}
	}
	if cfg.AdminPprof {
		t.Error("pprof on in the example")
	}

	// The Service exposes writ's listener and nothing else.
	svc := spec[serviceSpec](t, find(t, s.objs, "Service", ""))
	if !maps.Equal(svc.Selector, s.deployment.Template.Metadata.Labels) {
		t.Errorf("service selector %v, pod labels %v", svc.Selector, s.deployment.Template.Metadata.Labels)
	}
	if len(svc.Ports) != 1 || svc.Ports[0].TargetPort != "http" {
		t.Errorf("service ports %+v: only writ's http port", svc.Ports)
	}
	// Prometheus scrapes the admin port.
	ann := s.deployment.Template.Metadata.Annotations
	if _, adminPort := portOf(t, cfg.Admin); ann["prometheus.io/port"] != strconv.Itoa(adminPort) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v, admin %s", ann, cfg.Admin)
	}
	// The NetworkPolicy names real ports and admits admin only from somewhere.
	np := spec[networkPolicySpec](t, find(t, s.objs, "NetworkPolicy", ""))
	for _, in := range np.Ingress {
		for _, p := range in.Ports {
			if containerPort(s.writ, p.Port) == 0 {
				t.Errorf("network policy port %q is not a port of writ", p.Port)
			}
			if p.Port == "admin" && len(in.From) == 0 {
				t.Error("the network policy opens the admin port to everyone")
			}
		}
	}
	if !maps.Equal(np.PodSelector.MatchLabels, s.deployment.Selector.MatchLabels) {
		t.Error("network policy selects other pods")
	}
}

// TestSidecarStore: writ keeps its lifecycle in the file store, on a
// writable volume of its own (the root file system is read-only) mounted
// where writ.yaml's store.path points, on disk (not tmpfs), large enough for
// lifecycle.max_tasks at the measured bytes per task.
func TestSidecarStore(t *testing.T) {
	s := loadSidecar(t)
	cfg := sidecarConfig(t, s)
	if cfg.Store.Kind != config.StoreFile || cfg.Store.Path == "" || !filepath.IsAbs(cfg.Store.Path) {
		t.Fatalf("store %+v: the sidecar names the file store and its path", cfg.Store)
	}
	var mount string
	for _, m := range s.writ.VolumeMounts {
		if strings.HasPrefix(cfg.Store.Path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			if m.ReadOnly {
				t.Errorf("volume %s at %s is read-only: the store writes there", m.Name, m.MountPath)
			}
			for _, v := range s.pod.Volumes {
				if v.Name != m.Name {
					continue
				}
				if v.EmptyDir == nil {
					t.Errorf("volume %s: want the emptyDir the manifest explains", v.Name)
					break
				}
				if v.EmptyDir.Medium != "" {
					t.Errorf("volume %s is on medium %q: fsyncs on tmpfs keep nothing, and it counts as memory", v.Name, v.EmptyDir.Medium)
				}
				// ~850 bytes per task on disk (README "State"), twice for bbolt's
				// free pages.
				if limit := bytesOf(t, v.EmptyDir.SizeLimit); limit < int64(cfg.Lifecycle.MaxTasks)*850*2 {
					t.Errorf("volume %s: sizeLimit %s under twice %d tasks at ~850 bytes", v.Name, v.EmptyDir.SizeLimit, cfg.Lifecycle.MaxTasks)
				}
				mount = m.MountPath
			}
		}
	}
	if mount == "" {
		t.Errorf("store.path %s is on no volume of writ's (the root file system is read-only)", cfg.Store.Path)
	}
	for _, m := range s.validate.VolumeMounts {
		if m.MountPath == mount {
			t.Errorf("writ-validate mounts the store volume: it only reads the config")
		}
	}
}

// TestSidecarProbes: every probe is an HTTP GET on writ's admin port, at a path
// the admin handler serves; readiness waits longer than admin.ReadyTimeout.
func TestSidecarProbes(t *testing.T) {
	s := loadSidecar(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package writ.authz\n\ndecision := {\"allow\": true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := authz.LoadPolicy(context.Background(), []string{dir}, authz.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := authz.NewEngine(p, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(admin.Deps{Engine: engine}))
	defer srv.Close()
	probes := map[string]*probe{"startup": s.writ.StartupProbe, "liveness": s.writ.LivenessProbe, "readiness": s.writ.ReadinessProbe}
	for kind, pr := range probes {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s probe: want an httpGet probe", kind)
			continue
		}
		if pr.HTTPGet.Port != "admin" || containerPort(s.writ, "admin") == 0 {
			t.Errorf("%s probe: port %q, want writ's admin port", kind, pr.HTTPGet.Port)
		}
		resp, err := srv.Client().Get(srv.URL + pr.HTTPGet.Path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode != http.StatusOK {
			t.Errorf("%s probe: GET %s answers %d", kind, pr.HTTPGet.Path, resp.StatusCode)
		}
	}
	if s.writ.LivenessProbe.HTTPGet.Path != "/healthz" || s.writ.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("liveness is /healthz and readiness /readyz")
	}
	if got := time.Duration(s.writ.ReadinessProbe.TimeoutSeconds) * time.Second; got <= admin.ReadyTimeout {
		t.Errorf("readiness timeout %v: the admin API gives Ready up to %v", got, admin.ReadyTimeout)
	}
	if s.pod.TerminationGracePeriodSeconds <= 30 {
		t.Errorf("terminationGracePeriodSeconds %d: writ drains for up to 30s", s.pod.TerminationGracePeriodSeconds)
	}
}

// TestSidecarResources: requests sized by the benchmarks, limits above them,
// GOMEMLIMIT under the memory limit, and a hardened container.
func TestSidecarResources(t *testing.T) {
	s := loadSidecar(t)
	r := s.writ.Resources
	cpuReq, cpuLim := milliCPU(t, r.Requests["cpu"]), milliCPU(t, r.Limits["cpu"])
	memReq, memLim := bytesOf(t, r.Requests["memory"]), bytesOf(t, r.Limits["memory"])
	if cpuReq < 100 || cpuReq > 250 || memReq < 64<<20 || memReq > 128<<20 {
		t.Errorf("requests %v: want 100m-250m CPU and 64Mi-128Mi memory", r.Requests)
	}
	if cpuLim < cpuReq || memLim < memReq || memLim > 1<<30 {
		t.Errorf("limits %v under the requests %v or unreasonable", r.Limits, r.Requests)
	}
	var gomem string
	for _, e := range s.writ.Env {
		if e.Name == "GOMEMLIMIT" {
			gomem = e.Value
		}
	}
	if v := bytesOf(t, gomem); v >= memLim || v < memLim*3/4 {
		t.Errorf("GOMEMLIMIT %s: want 75-100%% of the memory limit %s", gomem, r.Limits["memory"])
	}
	for _, c := range []container{s.writ, s.validate} {
		sc := c.SecurityContext
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem ||
			!slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
			t.Errorf("%s: want no privilege escalation, a read-only root and no capabilities", c.Name)
		}
	}
	if !s.pod.SecurityContext.RunAsNonRoot {
		t.Error("pod must run as non-root")
	}
}

func milliCPU(t *testing.T, q string) int {
	t.Helper()
	if v, ok := strings.CutSuffix(q, "m"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("cpu %q", q)
		}
		return n
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil {
		t.Fatalf("cpu %q", q)
	}
	return int(f * 1000)
}

// bytesOf reads a Kubernetes memory quantity (Ki/Mi/Gi) or a GOMEMLIMIT (KiB/MiB/GiB).
func bytesOf(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, mult := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if v, ok := strings.CutSuffix(q, suffix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n * mult
			}
		}
	}
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("memory %q", q)
	}
	return n
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
	cm := find(t, loadObjects(t, policiesFile), "ConfigMap", "writ-policies")
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
	s := loadSidecar(t)
	cfg := sidecarConfig(t, s)
	mount := mountOf(t, s, s.writ, "writ-policies")
	var want []string
	for k := range cm.Data {
		want = append(want, mount+"/"+k)
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(cfg.Policies)); !slices.Equal(got, want) {
		t.Errorf("writ.yaml policies %v\nthe ConfigMap mounts %v", got, want)
	}
}

// kubeletMount lays files out as the kubelet mounts a ConfigMap volume: the
// data in a timestamped directory, ..data pointing at it, and one symlink per
// key through ..data. Calling it again is the kubelet's atomic update.
func kubeletMount(t *testing.T, dir string, files map[string]string, gen int) {
	t.Helper()
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", gen, gen)
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k := range files {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoliciesFromConfigMapVolume: writ.yaml's policy list loads, tests and all,
// from writ-policies laid out as the kubelet mounts it, and an update of the
// ConfigMap (the kubelet's ..data swap) is picked up by the policy watcher.
func TestPoliciesFromConfigMapVolume(t *testing.T) {
	s := loadSidecar(t)
	cfg := sidecarConfig(t, s)
	mount := mountOf(t, s, s.writ, "writ-policies")
	files := find(t, loadObjects(t, policiesFile), "ConfigMap", "writ-policies").Data
	dir := t.TempDir()
	kubeletMount(t, dir, files, 1)
	var paths []string
	for _, p := range cfg.Policies {
		rest, ok := strings.CutPrefix(p, mount+"/")
		if !ok {
			t.Fatalf("policy %s is not under the writ-policies mount %s", p, mount)
		}
		paths = append(paths, filepath.Join(dir, rest))
	}
	ctx := context.Background()
	p, err := authz.LoadPolicy(ctx, paths, authz.LoadOptions{})
	if err != nil {
		t.Fatalf("the policies do not load from the ConfigMap volume: %v", err)
	}
	if p.Tests.Passed == 0 || len(p.Files) != len(files) {
		t.Fatalf("loaded %d files (want %d), %d tests passed", len(p.Files), len(files), p.Tests.Passed)
	}
	engine, err := authz.NewEngine(p, authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rl := authz.NewReloader(engine, paths, authz.LoadOptions{}, nil)
	rl.Debounce = 20 * time.Millisecond
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rl.Watch(wctx) }()
	defer func() { cancel(); <-done }()

	// kubectl edit configmap writ-policies: the kubelet swaps ..data. Repeat
	// until the watcher (which may still be starting) sees one.
	edited := maps.Clone(files)
	deadline := time.Now().Add(15 * time.Second)
	for gen := 2; engine.Policy().Revision == p.Revision && time.Now().Before(deadline); gen++ {
		edited["data.json"] += "\n"
		kubeletMount(t, dir, edited, gen)
		time.Sleep(200 * time.Millisecond)
	}
	if engine.Policy().Revision == p.Revision {
		t.Fatalf("a ConfigMap update was not reloaded (last reload %+v)", rl.Last())
	}
	if last := rl.Last(); !last.OK {
		t.Fatalf("reload after the update: %+v", last)
	}
}
