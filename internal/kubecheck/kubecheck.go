// Package kubecheck checks writ's Kubernetes manifests without a cluster: it
// decodes them strictly into k8s.io/api types (the Prometheus Operator's for a
// ServiceMonitor) and checks the sidecar they describe: writ.yaml passes
// config.Parse, the ports are writ.yaml's, the probes hit real admin paths,
// the store is on a writable disk volume sized for it, resources are the
// measured ones, policies load from their ConfigMap as the kubelet mounts it.
// deploy's tests run it on deploy/kubernetes, deploy/helm's on the chart's
// rendering.
package kubecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/writ-authz/writ/admin"
	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

// ---- Kubernetes objects, decoded strictly into k8s.io/api types ----

// Manifests are the objects of one YAML stream (a file of deploy/, or a
// chart's rendering), each decoded into its k8s.io/api type (the Prometheus
// Operator's for a ServiceMonitor) refusing unknown fields: a misspelt or
// misplaced field fails as the API server's strict validation would.
type Manifests struct {
	Source      string
	ConfigMaps  map[string]*corev1.ConfigMap
	Deployments []*appsv1.Deployment
	Services    []*corev1.Service
	NetPols     []*networkingv1.NetworkPolicy
	PDBs        []*policyv1.PodDisruptionBudget
	Monitors    []*monitoringv1.ServiceMonitor
}

// DecodeFile decodes the YAML stream in the file at path (see DecodeStream).
func DecodeFile(t testing.TB, path string) *Manifests {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return DecodeStream(t, path, raw)
}

// DecodeStream decodes every document of raw; source names it in failures.
func DecodeStream(t testing.TB, source string, raw []byte) *Manifests {
	t.Helper()
	m := &Manifests{Source: source, ConfigMaps: map[string]*corev1.ConfigMap{}}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return m
		}
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue // an empty document (a template that renders nothing)
		}
		one, err := yaml.Marshal(&doc)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := sigsyaml.Unmarshal(one, &head); err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		strict := func(v any) {
			if err := sigsyaml.UnmarshalStrict(one, v); err != nil {
				t.Fatalf("%s: %s: %v", source, head.Kind, err)
			}
		}
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			o := new(corev1.ConfigMap)
			strict(o)
			m.ConfigMaps[o.Name] = o
		case "apps/v1 Deployment":
			o := new(appsv1.Deployment)
			strict(o)
			m.Deployments = append(m.Deployments, o)
		case "v1 Service":
			o := new(corev1.Service)
			strict(o)
			m.Services = append(m.Services, o)
		case "networking.k8s.io/v1 NetworkPolicy":
			o := new(networkingv1.NetworkPolicy)
			strict(o)
			m.NetPols = append(m.NetPols, o)
		case "policy/v1 PodDisruptionBudget":
			o := new(policyv1.PodDisruptionBudget)
			strict(o)
			m.PDBs = append(m.PDBs, o)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := new(monitoringv1.ServiceMonitor)
			strict(o)
			m.Monitors = append(m.Monitors, o)
		default:
			t.Fatalf("%s: unexpected %s %s", source, head.APIVersion, head.Kind)
		}
	}
}

// Sidecar is one agent's Deployment with writ in it, and writ's config.
type Sidecar struct {
	Source     string
	M          *Manifests
	Deployment *appsv1.Deployment
	Pod        corev1.PodSpec
	Writ       corev1.Container
	Agent      corev1.Container
	Validate   corev1.Container
	Cfg        *config.Config
}

// NewSidecar is the sidecar m describes: its one Deployment, the writ, agent
// and writ-validate containers, and writ.yaml from the writ-config ConfigMap,
// parsed by config.Parse.
func NewSidecar(t testing.TB, m *Manifests) *Sidecar {
	t.Helper()
	if len(m.Deployments) != 1 {
		t.Fatalf("%s: %d Deployments, want one", m.Source, len(m.Deployments))
	}
	s := &Sidecar{Source: m.Source, M: m, Deployment: m.Deployments[0]}
	s.Pod = s.Deployment.Spec.Template.Spec
	byName := func(cs []corev1.Container, name string) corev1.Container {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("%s: no container %q", m.Source, name)
		return corev1.Container{}
	}
	s.Writ = byName(s.Pod.Containers, "writ")
	s.Agent = byName(s.Pod.Containers, "agent")
	s.Validate = byName(s.Pod.InitContainers, "writ-validate")
	cm := s.ConfigMapOf(t, "writ-config")
	raw, ok := cm.Data["writ.yaml"]
	if !ok {
		t.Fatalf("%s: ConfigMap %s has no writ.yaml", m.Source, cm.Name)
	}
	cfg, err := config.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("%s: writ.yaml: %v\n%s", m.Source, err, raw)
	}
	s.Cfg = cfg
	return s
}

// ConfigMapOf is the ConfigMap behind the pod's volume named volume.
func (s *Sidecar) ConfigMapOf(t testing.TB, volume string) *corev1.ConfigMap {
	t.Helper()
	for _, v := range s.Pod.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cm := s.M.ConfigMaps[v.ConfigMap.Name]
			if cm == nil {
				t.Fatalf("%s: volume %s: no ConfigMap %s here", s.Source, volume, v.ConfigMap.Name)
			}
			return cm
		}
	}
	t.Fatalf("%s: no ConfigMap volume %s", s.Source, volume)
	return nil
}

// MountOf is where container c mounts volume vol, which must be read-only.
func MountOf(t testing.TB, s *Sidecar, c corev1.Container, vol string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.Name == vol {
			if !m.ReadOnly {
				t.Errorf("%s: container %s mounts %s writable", s.Source, c.Name, vol)
			}
			return m.MountPath
		}
	}
	t.Fatalf("%s: container %s does not mount %s", s.Source, c.Name, vol)
	return ""
}

// FlagValue is the value of flag name in args (-name v, --name v or
// -name=v), "" when it is not there.
func FlagValue(args []string, name string) string {
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

// PortOf splits addr into its host and port number.
func PortOf(t testing.TB, addr string) (string, int) {
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

// ContainerPort is the port number of c's port called name (0 if it has none).
func ContainerPort(c corev1.Container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return 0
}

// Config checks writ's configuration in the pod: writ.yaml passes
// config.Parse; both containers read it from the ConfigMap; writ listens on
// the ports the pod declares; the agent is reached over the pod's loopback
// only; the caller-facing Service exposes writ's listener and nothing else;
// the NetworkPolicy names real ports and admits admin from one namespace only.
func Config(t testing.TB, s *Sidecar) {
	t.Helper()
	cfg := s.Cfg
	for _, c := range []corev1.Container{s.Writ, s.Validate} {
		want := MountOf(t, s, c, "writ-config") + "/writ.yaml"
		if got := FlagValue(c.Args, "config"); got != want {
			t.Errorf("%s: %s: -config %q, the ConfigMap is mounted as %s", s.Source, c.Name, got, want)
		}
	}
	if s.Validate.Args[0] != "validate" || s.Writ.Args[0] != "serve" || s.Validate.Image != s.Writ.Image {
		t.Errorf("%s: init container %v (%s) must validate with writ's image (%s, %v)", s.Source, s.Validate.Args, s.Validate.Image, s.Writ.Image, s.Writ.Args)
	}
	if !slices.Contains(s.Validate.Args, "-offline") {
		t.Errorf("%s: writ-validate without -offline: an identity provider that is briefly down would block a rollout", s.Source)
	}
	// writ-validate reads everything writ reads, where writ reads it.
	for _, m := range s.Writ.VolumeMounts {
		if m.ReadOnly && MountOf(t, s, s.Validate, m.Name) != m.MountPath {
			t.Errorf("%s: writ-validate must see %s where writ does", s.Source, m.Name)
		}
	}
	for key, addr := range map[string]string{"http": cfg.Listen, "admin": cfg.Admin} {
		host, port := PortOf(t, addr)
		if got := ContainerPort(s.Writ, key); got != port {
			t.Errorf("%s: container port %s is %d, writ.yaml says %s", s.Source, key, got, addr)
		}
		if host != "0.0.0.0" && host != "" {
			t.Errorf("%s: %s %s: the probes and the Service reach the pod IP, not %s", s.Source, key, addr, host)
		}
	}
	if _, port := PortOf(t, cfg.Admin); port == 9090 {
		t.Errorf("%s: the admin port is Prometheus's 9090", s.Source)
	}
	if len(cfg.Agents) != 1 {
		t.Fatalf("%s: a sidecar fronts one agent, not %d", s.Source, len(cfg.Agents))
	}
	u, _ := url.Parse(cfg.Agents[0].Upstream)
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Errorf("%s: upstream %s: the agent is in the pod, at 127.0.0.1", s.Source, cfg.Agents[0].Upstream)
	}
	if len(s.Agent.Ports) != 0 {
		t.Errorf("%s: the agent declares ports: nothing outside the pod may reach it", s.Source)
	}
	for _, e := range s.Agent.Env {
		if e.Name == "LISTEN_ADDR" && e.Value != u.Host {
			t.Errorf("%s: agent env %s=%s: writ's upstream is %s", s.Source, e.Name, e.Value, u.Host)
		}
	}
	if cfg.AdminPprof {
		t.Errorf("%s: pprof on", s.Source)
	}
	labels := s.Deployment.Spec.Template.Labels
	if !maps.Equal(s.Deployment.Spec.Selector.MatchLabels, labels) {
		t.Errorf("%s: selector %v, pod labels %v", s.Source, s.Deployment.Spec.Selector.MatchLabels, labels)
	}
	// The caller-facing Service exposes writ's listener and nothing else;
	// a metrics Service (the chart's, for a ServiceMonitor) exposes admin only.
	callers := 0
	for _, svc := range s.M.Services {
		if !maps.Equal(svc.Spec.Selector, labels) {
			t.Errorf("%s: service %s selector %v, pod labels %v", s.Source, svc.Name, svc.Spec.Selector, labels)
		}
		if len(svc.Spec.Ports) != 1 {
			t.Errorf("%s: service %s exposes %d ports", s.Source, svc.Name, len(svc.Spec.Ports))
			continue
		}
		switch svc.Spec.Ports[0].TargetPort.String() {
		case "http":
			callers++
		case "admin":
			if len(s.M.Monitors) == 0 {
				t.Errorf("%s: service %s exposes the admin API, and no ServiceMonitor uses it", s.Source, svc.Name)
			}
		default:
			t.Errorf("%s: service %s targets %s", s.Source, svc.Name, svc.Spec.Ports[0].TargetPort.String())
		}
	}
	if callers != 1 {
		t.Errorf("%s: %d services for callers, want one", s.Source, callers)
	}
	// Prometheus scrapes the admin port: by annotation, or by ServiceMonitor.
	ann := s.Deployment.Spec.Template.Annotations
	if len(s.M.Monitors) == 0 {
		if _, adminPort := PortOf(t, cfg.Admin); ann["prometheus.io/port"] != strconv.Itoa(adminPort) || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: scrape annotations %v, admin %s", s.Source, ann, cfg.Admin)
		}
	}
	for _, np := range s.M.NetPols {
		for _, in := range np.Spec.Ingress {
			for _, p := range in.Ports {
				if ContainerPort(s.Writ, p.Port.String()) == 0 {
					t.Errorf("%s: network policy port %q is not a port of writ", s.Source, p.Port.String())
				}
				if p.Port.String() == "admin" && len(in.From) == 0 {
					t.Errorf("%s: the network policy opens the admin port to everyone", s.Source)
				}
			}
		}
		if !maps.Equal(np.Spec.PodSelector.MatchLabels, s.Deployment.Spec.Selector.MatchLabels) {
			t.Errorf("%s: network policy selects other pods", s.Source)
		}
	}
}

// AdminAccess checks what the agent, which shares the pod's network and so
// reaches the admin port on the pod's loopback, can do there: the admin API
// as writ builds it from this writ.yaml answers its probes and scrapes, but
// refuses the agent the operator routes (a task record, the policy, a
// reload); with admin_token_file set, the token is on a Secret volume that
// the agent container does not mount.
func AdminAccess(t testing.TB, s *Sidecar) {
	t.Helper()
	cfg := s.Cfg
	token := ""
	if cfg.AdminTokenFile != "" {
		dir := path.Dir(cfg.AdminTokenFile)
		vol := ""
		for _, m := range s.Writ.VolumeMounts {
			if m.MountPath == dir {
				vol = m.Name
			}
		}
		secret := false
		for _, v := range s.Pod.Volumes {
			secret = secret || (v.Name == vol && v.Secret != nil)
		}
		if !secret {
			t.Errorf("%s: admin_token_file %s is not on a Secret volume of writ's", s.Source, cfg.AdminTokenFile)
		}
		for _, m := range s.Agent.VolumeMounts {
			if m.Name == vol || strings.HasPrefix(cfg.AdminTokenFile, m.MountPath+"/") {
				t.Errorf("%s: the agent container mounts the admin token (%s)", s.Source, m.MountPath)
			}
		}
		token = "a-token-the-agent-does-not-have-0123456789"
	}
	store := task.NewMemoryStore(task.MemoryLimits{})
	if err := store.Create(context.Background(), task.Record{Task: task.Task{ID: "t-1", State: task.Running,
		Owner: task.Owner{AgentID: "payments-investigator", Tenant: "wholesale"}}, Agent: cfg.Agents[0].Name}); err != nil {
		t.Fatal(err)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "writ_up 1\n") })
	h := admin.New(admin.Deps{Store: store, Metrics: metrics, Addrs: []string{cfg.Admin}, Hosts: cfg.AdminHosts, Token: token})
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, port := PortOf(t, cfg.Admin)
	get := func(method, p, host string) int {
		req, err := http.NewRequest(method, srv.URL+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	loopback := "127.0.0.1:" + strconv.Itoa(port)
	for _, r := range [][2]string{{"GET", "/v1/agents/" + cfg.Agents[0].Name + "/tasks/t-1"}, {"GET", "/v1/policy"}, {"POST", "/v1/policy/reload"}} {
		if code := get(r[0], r[1], loopback); code < 400 {
			t.Errorf("%s: the agent, on the pod's loopback: %s %s answers %d", s.Source, r[0], r[1], code)
		}
	}
	if code := get("GET", "/metrics", "10.1.2.3:"+strconv.Itoa(port)); code != http.StatusOK {
		t.Errorf("%s: Prometheus on the pod IP: /metrics answers %d", s.Source, code)
	}
}

// Store checks that writ keeps its lifecycle in the file store, on a
// writable volume of its own (the root file system is read-only) mounted
// where writ.yaml's store.path points, on disk (not tmpfs), large enough for
// lifecycle.max_tasks at the measured bytes per task.
func Store(t testing.TB, s *Sidecar) {
	t.Helper()
	{
		cfg := s.Cfg
		if cfg.Store.Kind != config.StoreFile || cfg.Store.Path == "" || !filepath.IsAbs(cfg.Store.Path) {
			t.Fatalf("%s: store %+v: the sidecar names the file store and its path", s.Source, cfg.Store)
		}
		var mount string
		for _, m := range s.Writ.VolumeMounts {
			if !strings.HasPrefix(cfg.Store.Path, strings.TrimSuffix(m.MountPath, "/")+"/") {
				continue
			}
			if m.ReadOnly {
				t.Errorf("%s: volume %s at %s is read-only: the store writes there", s.Source, m.Name, m.MountPath)
			}
			for _, v := range s.Pod.Volumes {
				if v.Name != m.Name {
					continue
				}
				if v.EmptyDir == nil {
					t.Errorf("%s: volume %s: want an emptyDir", s.Source, v.Name)
					break
				}
				if v.EmptyDir.Medium != "" {
					t.Errorf("%s: volume %s is on medium %q: fsyncs on tmpfs keep nothing, and it counts as memory", s.Source, v.Name, v.EmptyDir.Medium)
				}
				// ~850 bytes per task on disk (docs/state.md), twice for bbolt's free pages.
				if v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Value() < int64(cfg.Lifecycle.MaxTasks)*850*2 {
					t.Errorf("%s: volume %s: sizeLimit %v under twice %d tasks at ~850 bytes", s.Source, v.Name, v.EmptyDir.SizeLimit, cfg.Lifecycle.MaxTasks)
				}
				mount = m.MountPath
			}
		}
		if mount == "" {
			t.Errorf("%s: store.path %s is on no volume of writ's (the root file system is read-only)", s.Source, cfg.Store.Path)
		}
		for _, m := range s.Validate.VolumeMounts {
			if m.MountPath == mount {
				t.Errorf("%s: writ-validate mounts the store volume: it only reads the config", s.Source)
			}
		}
	}
}

// Probes checks that every probe is an HTTP GET on writ's admin port, at a
// path the admin handler serves, and that readiness waits longer than
// admin.ReadyTimeout.
func Probes(t testing.TB, s *Sidecar) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package writ.authz\n\ndecision := {\"allow\": true}\n"), 0o600); err != nil {
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
	{
		probes := map[string]*corev1.Probe{"startup": s.Writ.StartupProbe, "liveness": s.Writ.LivenessProbe, "readiness": s.Writ.ReadinessProbe}
		for kind, pr := range probes {
			if pr == nil || pr.HTTPGet == nil {
				t.Errorf("%s: %s probe: want an httpGet probe", s.Source, kind)
				continue
			}
			if pr.HTTPGet.Port.String() != "admin" || ContainerPort(s.Writ, "admin") == 0 {
				t.Errorf("%s: %s probe: port %q, want writ's admin port", s.Source, kind, pr.HTTPGet.Port.String())
			}
			resp, err := srv.Client().Get(srv.URL + pr.HTTPGet.Path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %s probe: GET %s answers %d", s.Source, kind, pr.HTTPGet.Path, resp.StatusCode)
			}
		}
		if s.Writ.LivenessProbe.HTTPGet.Path != "/healthz" || s.Writ.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: liveness is /healthz and readiness /readyz", s.Source)
		}
		if got := time.Duration(s.Writ.ReadinessProbe.TimeoutSeconds) * time.Second; got <= admin.ReadyTimeout {
			t.Errorf("%s: readiness timeout %v: the admin API gives Ready up to %v", s.Source, got, admin.ReadyTimeout)
		}
		if g := s.Pod.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
			t.Errorf("%s: terminationGracePeriodSeconds %v: writ drains for up to 30s", s.Source, g)
		}
	}
}

// Resources checks writ's requests are sized by the benchmarks, its limits
// above them and GOMEMLIMIT under the memory limit, and that the containers
// are hardened.
func Resources(t testing.TB, s *Sidecar) {
	t.Helper()
	{
		r := s.Writ.Resources
		cpuReq, cpuLim := r.Requests.Cpu().MilliValue(), r.Limits.Cpu().MilliValue()
		memReq, memLim := r.Requests.Memory().Value(), r.Limits.Memory().Value()
		if cpuReq < 100 || cpuReq > 250 || memReq < 64<<20 || memReq > 128<<20 {
			t.Errorf("%s: requests %v: want 100m-250m CPU and 64Mi-128Mi memory", s.Source, r.Requests)
		}
		if cpuLim < cpuReq || memLim < memReq || memLim > 1<<30 {
			t.Errorf("%s: limits %v under the requests %v or unreasonable", s.Source, r.Limits, r.Requests)
		}
		var gomem string
		for _, e := range s.Writ.Env {
			if e.Name == "GOMEMLIMIT" {
				gomem = e.Value
			}
		}
		if v := BytesOf(t, gomem); v >= memLim || v < memLim*3/4 {
			t.Errorf("%s: GOMEMLIMIT %s: want 75-100%% of the memory limit %v", s.Source, gomem, r.Limits.Memory())
		}
		for _, c := range []corev1.Container{s.Writ, s.Validate} {
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
				!*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s: %s: want no privilege escalation, a read-only root and no capabilities", s.Source, c.Name)
			}
		}
		if ps := s.Pod.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
			t.Errorf("%s: the pod must run as non-root", s.Source)
		}
	}
}

// BytesOf reads a GOMEMLIMIT (KiB/MiB/GiB).
func BytesOf(t testing.TB, q string) int64 {
	t.Helper()
	for suffix, mult := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if v, ok := strings.CutSuffix(q, suffix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n * mult
			}
		}
	}
	n, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q", q)
	}
	return n
}

// PolicyList checks that writ.yaml lists exactly the ConfigMap's files where
// the pod mounts them.
func PolicyList(t testing.TB, s *Sidecar, files map[string]string) {
	t.Helper()
	mount := MountOf(t, s, s.Writ, "writ-policies")
	var want []string
	for k := range files {
		want = append(want, mount+"/"+k)
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(s.Cfg.Policies)); !slices.Equal(got, want) {
		t.Errorf("%s: writ.yaml policies %v\nthe ConfigMap mounts %v", s.Source, got, want)
	}
}

// KubeletMount lays files out as the kubelet mounts a ConfigMap volume: the
// data in a timestamped directory, ..data pointing at it, and one symlink per
// key through ..data. Calling it again is the kubelet's atomic update.
func KubeletMount(t testing.TB, dir string, files map[string]string, gen int) {
	t.Helper()
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", gen, gen)
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil { //nolint:gosec // the kubelet's mode for a ConfigMap volume's data directory
		t.Fatal(err)
	}
	for k, v := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, k), []byte(v), 0o644); err != nil { //nolint:gosec // a ConfigMap volume's defaultMode, as the kubelet writes it
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

// PoliciesLoad checks that s's policy list loads from files laid out as the
// kubelet mounts the ConfigMap, and that an update of the ConfigMap is
// reloaded.
func PoliciesLoad(t testing.TB, s *Sidecar, files map[string]string) {
	t.Helper()
	cfg := s.Cfg
	mount := MountOf(t, s, s.Writ, "writ-policies")
	dir := t.TempDir()
	KubeletMount(t, dir, files, 1)
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
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// kubectl edit configmap writ-policies: the kubelet swaps ..data. Repeat
	// until the watcher (which may still be starting) sees one.
	edited := maps.Clone(files)
	deadline := time.Now().Add(15 * time.Second)
	for gen := 2; engine.Policy().Revision == p.Revision && time.Now().Before(deadline); gen++ {
		edited["data.json"] += "\n"
		KubeletMount(t, dir, edited, gen)
		time.Sleep(200 * time.Millisecond)
	}
	if engine.Policy().Revision == p.Revision {
		t.Fatalf("a ConfigMap update was not reloaded (last reload %+v)", rl.Last())
	}
	if last := rl.Last(); !last.OK {
		t.Fatalf("reload after the update: %+v", last)
	}
}
