// Package helm_test renders the chart in writ/ with the Helm library (no helm
// binary, no cluster) and checks what it renders: every object decoded
// strictly into its k8s.io/api type, the sidecar it describes checked as
// deploy/kubernetes/sidecar.yaml is (kubecheck), and what only the chart has:
// Secrets wired into writ.yaml, the ServiceMonitor, the PodDisruptionBudget,
// policies from the values.
package helm_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/kubecheck"
)

const chartDir = "writ"

// renderChart renders the chart as `helm install sanctions -n agents` would,
// with the Helm library itself (no helm binary), and decodes the result.
func renderChart(t *testing.T, name string, values map[string]any) *kubecheck.Manifests {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "sanctions", Namespace: "agents",
		Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var stream strings.Builder
	for _, f := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(f, ".yaml") {
			stream.WriteString("---\n" + out[f] + "\n")
		}
	}
	return kubecheck.DecodeStream(t, name, []byte(stream.String()))
}

// fullValues turns everything on: TLS with client certificates, a JWKS
// Secret, the shipped policies in a ConfigMap, a ServiceMonitor.
func fullValues(t *testing.T) map[string]any {
	t.Helper()
	files := map[string]any{}
	for k, v := range shippedPolicies(t) {
		files[k] = v
	}
	return map[string]any{
		"agent": map[string]any{"tenants": []any{"wholesale"}, "owner": "group-compliance",
			"publicURL": "https://sanctions.agents.bank.ae", "securitySchemes": []any{"oauth2", "mtls"}},
		"writ": map[string]any{
			"identity": map[string]any{
				"jwt":  []any{map[string]any{"issuer": "https://idp.bank.ae", "audiences": []any{"a2a-gateway"}, "jwks_file": "/etc/writ/secrets/jwks/jwks.json"}},
				"mtls": map[string]any{"trust_domain": "bank.ae"},
			},
			"config": map[string]any{"push": map[string]any{"queue_size": 5000}},
		},
		"secrets":        map[string]any{"tls": "sanctions-writ-tls", "jwks": "idp-jwks", "adminToken": "sanctions-writ-admin"},
		"policies":       map[string]any{"files": files},
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
	}
}

// TestHelmSecrets: the Secrets the values name are mounted read-only for
// writ and writ-validate, and writ.yaml points into them: tls: serves HTTPS
// and verifies client certificates against ca.crt, identity's jwks_file is
// in the JWKS Secret.
func TestHelmSecrets(t *testing.T) {
	s := kubecheck.NewSidecar(t, renderChart(t, "helm (everything on)", fullValues(t)))
	secretOf := map[string]string{}
	for _, v := range s.Pod.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
		}
	}
	if secretOf["writ-tls"] != "sanctions-writ-tls" || secretOf["writ-jwks"] != "idp-jwks" || secretOf["writ-admin-token"] != "sanctions-writ-admin" {
		t.Fatalf("secret volumes %v", secretOf)
	}
	tlsDir := kubecheck.MountOf(t, s, s.Writ, "writ-tls")
	tls := s.Cfg.TLS
	if tls == nil || tls.CertFile != tlsDir+"/tls.crt" || tls.KeyFile != tlsDir+"/tls.key" ||
		tls.ClientCAFile != tlsDir+"/ca.crt" || tls.Mode() != "require" {
		t.Errorf("tls %+v, the Secret is at %s", tls, tlsDir)
	}
	if jwks := s.Cfg.Identity.JWT[0].JWKSFile; filepath.Dir(jwks) != kubecheck.MountOf(t, s, s.Writ, "writ-jwks") {
		t.Errorf("jwks_file %s is not in the mounted Secret", jwks)
	}
	if tok := s.Cfg.AdminTokenFile; filepath.Dir(tok) != kubecheck.MountOf(t, s, s.Writ, "writ-admin-token") {
		t.Errorf("admin_token_file %q is not in the mounted admin Secret", tok)
	}
	if s.Cfg.Push.QueueSize != 5000 || s.Cfg.Agents[0].Owner != "group-compliance" {
		t.Errorf("writ.config and the agent's metadata are not in writ.yaml: %+v", s.Cfg)
	}
	if w := s.Cfg.Warnings(); len(w) != 0 {
		t.Errorf("writ validate would warn: %v", w)
	}
	d := kubecheck.NewSidecar(t, renderChart(t, "helm (defaults)", nil))
	if d.Cfg.TLS != nil || !d.Cfg.EmbeddedPolicies() {
		t.Errorf("defaults: tls %+v, policies %v: want none, and the embedded policies", d.Cfg.TLS, d.Cfg.Policies)
	}
}

// TestHelmServiceMonitorAndPDB: the ServiceMonitor scrapes /metrics on
// writ's admin port through a Service that exposes only that port (the
// NetworkPolicy still admits the monitoring namespace alone); the
// PodDisruptionBudget covers the pods and lets one go at a time.
func TestHelmServiceMonitorAndPDB(t *testing.T) {
	s := kubecheck.NewSidecar(t, renderChart(t, "helm (everything on)", fullValues(t)))
	if len(s.M.Monitors) != 1 {
		t.Fatalf("%d ServiceMonitors", len(s.M.Monitors))
	}
	sm := s.M.Monitors[0]
	if sm.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v: the values' labels select it for a Prometheus", sm.Labels)
	}
	var scraped []string
	for _, svc := range s.M.Services {
		ok := true
		for k, v := range sm.Spec.Selector.MatchLabels {
			ok = ok && svc.Labels[k] == v
		}
		if ok {
			scraped = append(scraped, svc.Name)
			for _, ep := range sm.Spec.Endpoints {
				if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != ep.Port || svc.Spec.Ports[0].TargetPort.String() != "admin" || ep.Path != "/metrics" {
					t.Errorf("endpoint %+v on service %s %+v: want /metrics on writ's admin port", ep, svc.Name, svc.Spec.Ports)
				}
			}
		}
	}
	if len(scraped) != 1 {
		t.Errorf("the ServiceMonitor selects services %v, want the metrics one", scraped)
	}
	for _, s := range []*kubecheck.Sidecar{s, kubecheck.NewSidecar(t, renderChart(t, "helm (defaults)", nil))} {
		if len(s.M.PDBs) != 1 {
			t.Fatalf("%s: %d PodDisruptionBudgets", s.Source, len(s.M.PDBs))
		}
		pdb := s.M.PDBs[0]
		if !maps.Equal(pdb.Spec.Selector.MatchLabels, s.Deployment.Spec.Selector.MatchLabels) {
			t.Errorf("%s: the PDB selects %v, the pods are %v", s.Source, pdb.Spec.Selector.MatchLabels, s.Deployment.Spec.Selector.MatchLabels)
		}
		if pdb.Spec.MinAvailable == nil || s.Deployment.Spec.Replicas == nil || pdb.Spec.MinAvailable.IntValue() >= int(*s.Deployment.Spec.Replicas) {
			t.Errorf("%s: minAvailable %v of %v replicas: a drain could never proceed", s.Source, pdb.Spec.MinAvailable, s.Deployment.Spec.Replicas)
		}
	}
}

// TestHelmPolicies: policies given in the values become a ConfigMap that
// writ.yaml lists file by file where the pod mounts it; they load, tests
// and all, from that ConfigMap as the kubelet mounts it, and an update is
// reloaded. Without them, writ serves its embedded policies (no ConfigMap).
func TestHelmPolicies(t *testing.T) {
	s := kubecheck.NewSidecar(t, renderChart(t, "helm (everything on)", fullValues(t)))
	cm := s.ConfigMapOf(t, "writ-policies")
	if !maps.Equal(cm.Data, shippedPolicies(t)) {
		keys := slices.Collect(maps.Keys(cm.Data))
		sort.Strings(keys)
		t.Fatalf("the policies ConfigMap differs from policies/ (keys %v)", keys)
	}
	kubecheck.PolicyList(t, s, cm.Data)
	kubecheck.PoliciesLoad(t, s, cm.Data)
	d := kubecheck.NewSidecar(t, renderChart(t, "helm (defaults)", nil))
	for _, v := range d.Pod.Volumes {
		if v.Name == "writ-policies" {
			t.Error("defaults: a policies volume, but the embedded policies serve")
		}
	}
}

// shippedPolicies reads every file writ loads from policies/.
func shippedPolicies(t *testing.T) map[string]string {
	t.Helper()
	const dir = "../../policies"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); e.IsDir() || (ext != ".rego" && ext != ".json") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(raw)
	}
	return out
}

// sidecars are the chart rendered with its defaults and with everything on.
func sidecars(t *testing.T) []*kubecheck.Sidecar {
	t.Helper()
	return []*kubecheck.Sidecar{kubecheck.NewSidecar(t, renderChart(t, "helm (defaults)", nil)),
		kubecheck.NewSidecar(t, renderChart(t, "helm (everything on)", fullValues(t)))}
}

// TestChartSidecar: the chart's Deployment passes every check the plain
// manifest (deploy/kubernetes/sidecar.yaml) passes: config, ports, Service,
// NetworkPolicy, store volume, probes, measured resources, and the agent
// refused the admin API's operator routes, with and without an admin token
// Secret.
//
// Threat: the agent in the pod reads every caller's task records through
// writ's admin port. Defence: without secrets.adminToken the operator routes
// are off; with it, the token is mounted into writ's containers only.
func TestChartSidecar(t *testing.T) {
	for _, s := range sidecars(t) {
		kubecheck.Config(t, s)
		kubecheck.AdminAccess(t, s)
		kubecheck.Store(t, s)
		kubecheck.Probes(t, s)
		kubecheck.Resources(t, s)
	}
}

// TestHelmFleet: the fleet example (deploy/helm/examples/fleet-values.yaml:
// one writ beside every agent, one bundle for all) renders a writ.yaml that
// takes its policy from the signed bundle (persisted on the state volume,
// the key in its mounted Secret), ships decisions to the collector and its
// status to the status service (each token in its own Secret), labels the
// instance and traces to the OTel Collector; the sidecar passes every check
// the plain manifest does. A bundle beside policies fails the render.
func TestHelmFleet(t *testing.T) {
	raw, err := os.ReadFile("examples/fleet-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValues(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := kubecheck.NewSidecar(t, renderChart(t, "helm (fleet example)", vals))
	kubecheck.Config(t, s)
	kubecheck.AdminAccess(t, s)
	kubecheck.Store(t, s)
	c := s.Cfg
	b := c.PolicyBundle
	if b == nil || b.URL != "http://bundle-server.writ-system.svc/bundles/writ.tar.gz" || len(c.Policies) != 0 {
		t.Fatalf("policy_bundle %+v, policies %v", b, c.Policies)
	}
	var state string
	for _, m := range s.Writ.VolumeMounts {
		if m.Name == "writ-state" && !m.ReadOnly {
			state = m.MountPath
		}
	}
	if state == "" || !strings.HasPrefix(b.PersistDir, state+"/") {
		t.Errorf("persist_dir %s is not on the writable state volume (%q)", b.PersistDir, state)
	}
	if b.Signing == nil || b.Signing.KeyID != "writ" || b.Signing.Scope != "writ" ||
		filepath.Dir(b.Signing.PublicKeyFile) != kubecheck.MountOf(t, s, s.Writ, "writ-bundle-key") {
		t.Errorf("signing %+v: the key is not in the mounted Secret", b.Signing)
	}
	up := c.DecisionLog.Upload
	if up == nil || up.URL != "http://decision-collector.writ-system.svc:8080" || !slices.Equal(up.Mask, []string{"/input/caller/user_id"}) ||
		filepath.Dir(up.TokenFile) != kubecheck.MountOf(t, s, s.Writ, "writ-collector-token") || c.DecisionLog.Output != "stdout" {
		t.Errorf("decision_log %+v upload %+v", c.DecisionLog, up)
	}
	if st := c.Status; st == nil || st.URL != "http://status.writ-system.svc:8080" ||
		filepath.Dir(st.TokenFile) != kubecheck.MountOf(t, s, s.Writ, "writ-status-token") {
		t.Errorf("status %+v", c.Status)
	}
	if c.Labels["cluster"] != "dxb-1" {
		t.Errorf("labels %v", c.Labels)
	}
	if tr := c.Tracing; tr == nil || tr.Endpoint != "otel-collector.observability.svc:4317" || tr.SampleRatio == nil || *tr.SampleRatio != 0.1 ||
		tr.ServiceName != "sanctions-screening-agent" {
		t.Errorf("tracing %+v", c.Tracing)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("writ validate would warn: %v", w)
	}

	// Defaults: none of it.
	d := kubecheck.NewSidecar(t, renderChart(t, "helm (defaults)", nil))
	if d.Cfg.PolicyBundle != nil || d.Cfg.DecisionLog.Upload != nil || d.Cfg.Status != nil || d.Cfg.Tracing != nil {
		t.Errorf("defaults turn a fleet part on: %+v", d.Cfg)
	}

	// The bundle from an OCI registry, the lifecycle not shipped.
	oci, err := chartutil.ReadValues(raw)
	if err != nil {
		t.Fatal(err)
	}
	fleet := oci["fleet"].(map[string]any)
	fleet["bundle"].(map[string]any)["type"] = "oci"
	fleet["bundle"].(map[string]any)["url"] = "https://registry.writ-system.svc/writ/policy:prod"
	fleet["decisionLogUpload"].(map[string]any)["lifecycle"] = false
	o := kubecheck.NewSidecar(t, renderChart(t, "helm (fleet, oci)", oci))
	if b := o.Cfg.PolicyBundle; b == nil || b.Type != config.BundleOCI || b.URL != "https://registry.writ-system.svc/writ/policy:prod" {
		t.Errorf("policy_bundle from an OCI registry: %+v", b)
	}
	if o.Cfg.DecisionLog.Upload.ShipsLifecycle() || !c.DecisionLog.Upload.ShipsLifecycle() || b.Type != config.BundleHTTP {
		t.Errorf("lifecycle: the example ships it (%v), lifecycle: false does not (%v); the example's bundle type %q",
			c.DecisionLog.Upload.ShipsLifecycle(), o.Cfg.DecisionLog.Upload.ShipsLifecycle(), b.Type)
	}

	// A bundle and policies: refused when rendered.
	vals["policies"] = map[string]any{"files": map[string]any{"data.json": "{}"}}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "sanctions", Namespace: "agents", Revision: 1, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Render(ch, rv); err == nil || !strings.Contains(err.Error(), "fleet.bundle.url and policies are exclusive") {
		t.Errorf("a bundle beside policies rendered: %v", err)
	}
}
