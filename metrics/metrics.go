// Package metrics exports writ's Prometheus metrics (writ_*) from the proxy's hooks, push outcomes and the live components' counters.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/proxy"
	"github.com/writ-authz/writ/proxy/push"
	"github.com/writ-authz/writ/task"
)

// Sources are the live components whose counters are read at scrape time. Every
// field is optional: the families of a nil source are not exported.
type Sources struct {
	// Engine gives the decision-cache counters and the live policy revision.
	Engine *authz.Engine
	// Reloader gives the policy reload counts.
	Reloader *authz.Reloader
	// Identity gives the verified-token cache counters.
	Identity *identity.Resolver
	// Store gives the number of tasks tracked in each state.
	Store *task.MemoryStore
	// Push gives the delivery queue's depth and overflow count.
	Push *push.Deliverer
	// Proxy gives the sidecar's upstream error counters.
	Proxy *proxy.Server
}

// Metrics is writ's metrics: a registry of its own holding the writ_ families, the
// Go and process collectors, and the hooks that feed the event-driven families.
// It implements proxy.Hooks; every method is safe for concurrent use and never
// blocks.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	tenants bool

	mu       sync.Mutex
	attached Sources // the sources registered so far

	decisions        *prometheus.CounterVec // route, operation, result, mode[, tenant]
	denials          *prometheus.CounterVec // route, operation, code
	decisionDuration *prometheus.HistogramVec
	requestDuration  *prometheus.HistogramVec
	requests         *prometheus.CounterVec
	upstreamDuration *prometheus.HistogramVec
	transitions      *prometheus.CounterVec
	tasksCreated     prometheus.Counter
	violations       *prometheus.CounterVec
	pushDeliveries   *prometheus.CounterVec
	pushAttempts     *prometheus.CounterVec
	pushDuration     prometheus.Histogram
	guardRefusals    *prometheus.CounterVec
	extAuthz         *prometheus.CounterVec

	// The request path's children, cached by their label values: a lock-free
	// read instead of the vectors' label hashing and validation.
	decisionKids children[decisionKey, prometheus.Counter]
	denialKids   children[denialKey, prometheus.Counter]
	requestKids  children[requestKey, requestKid]
	upstreamKids children[string, prometheus.Observer]
	evalKids     [3][2]atomic.Pointer[prometheus.Observer] // mode index × cache hit
}

type decisionKey struct{ route, op, result, mode, tenant string }
type denialKey struct{ route, op, code string }
type requestKey struct{ route, op, status, mode string }

// requestKid holds a request's counter and latency histogram.
type requestKid struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// children caches a vector's children by a comparable key. Reads are lock-free
// lookups in an immutable map; a child not in it yet is looked up (or built)
// under a mutex and the immutable map is rebuilt once the misses have paid for
// the copy, so the cost stays amortised O(1). Its size is the vector's: label
// cardinality is bounded upstream of it.
type children[K comparable, V any] struct {
	read   atomic.Pointer[map[K]V]
	mu     sync.Mutex
	dirty  map[K]V // children not in read yet
	misses int
}

// get returns the child of k, building it with build on first use; false when
// build fails (invalid label values: the event is not counted).
func (c *children[K, V]) get(k K, build func() (V, error)) (V, bool) {
	if r := c.read.Load(); r != nil {
		if v, ok := (*r)[k]; ok {
			return v, true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var read map[K]V
	if r := c.read.Load(); r != nil {
		read = *r
	}
	if v, ok := read[k]; ok {
		return v, true
	}
	v, ok := c.dirty[k]
	if !ok {
		var err error
		if v, err = build(); err != nil {
			return v, false
		}
		if c.dirty == nil {
			c.dirty = map[K]V{}
		}
		c.dirty[k] = v
	}
	if c.misses++; c.misses >= len(read)+len(c.dirty) {
		next := make(map[K]V, len(read)+len(c.dirty))
		for k, v := range read {
			next[k] = v
		}
		for k, v := range c.dirty {
			next[k] = v
		}
		c.read.Store(&next)
		c.dirty, c.misses = nil, 0
	}
	return v, true
}

var _ proxy.Hooks = (*Metrics)(nil)

// The metric family names. Dashboards and alert rules are built on them: never
// rename one.
const (
	nameDecisions          = "writ_decisions_total"
	nameDenials            = "writ_denials_total"
	nameDecisionDuration   = "writ_decision_duration_seconds"
	nameRequestDuration    = "writ_request_duration_seconds"
	nameRequests           = "writ_requests_total"
	nameUpstreamDuration   = "writ_upstream_duration_seconds"
	nameUpstreamErrors     = "writ_upstream_errors_total"
	nameUpstreamInvalid    = "writ_upstream_invalid_responses_total"
	nameDecisionCacheHits  = "writ_decision_cache_hits_total"
	nameDecisionCacheMiss  = "writ_decision_cache_misses_total"
	nameTokenCacheHits     = "writ_token_cache_hits_total"
	nameTokenCacheMiss     = "writ_token_cache_misses_total"
	nameTasks              = "writ_tasks"
	nameTransitions        = "writ_task_transitions_total"
	nameTasksCreated       = "writ_tasks_created_total"
	nameViolations         = "writ_protocol_violations_total"
	namePushDeliveries     = "writ_push_deliveries_total"
	namePushAttempts       = "writ_push_attempts_total"
	namePushDuration       = "writ_push_delivery_duration_seconds"
	namePushQueueDepth     = "writ_push_queue_depth"
	namePushDropped        = "writ_push_dropped_total"
	namePushGuardRefusals  = "writ_push_guard_refusals_total"
	namePolicyReloads      = "writ_policy_reloads_total"
	namePolicyInfo         = "writ_policy_info"
	nameExtAuthzChecks     = "writ_extauthz_checks_total"
	labelTenant            = "tenant"
	resultAllow            = "allow"
	resultDeny             = "deny"
	resultDryRun           = "dry_run"
	resultError            = "error"
	resultDelivered        = "delivered"
	resultRetry            = "retry"
	resultFailed           = "failed"
	labelUnknown           = "other"
	reloadOK, reloadFailed = "ok", "failed"
)

var names = []string{
	nameDecisions, nameDenials, nameDecisionDuration, nameRequestDuration, nameRequests,
	nameUpstreamDuration, nameUpstreamErrors, nameUpstreamInvalid,
	nameDecisionCacheHits, nameDecisionCacheMiss, nameTokenCacheHits, nameTokenCacheMiss,
	nameTasks, nameTransitions, nameTasksCreated, nameViolations,
	namePushDeliveries, namePushAttempts, namePushDuration, namePushQueueDepth, namePushDropped, namePushGuardRefusals,
	namePolicyReloads, namePolicyInfo, nameExtAuthzChecks,
}

// Names lists every writ_ metric family a Metrics can export, sorted. A family
// read from a source shows in a scrape once that source is set; an event-driven
// family with labels shows once it has seen an event.
func Names() []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}

// Histogram buckets, in seconds.
var (
	// A decision is an in-process evaluation or a cache lookup: microseconds to
	// milliseconds.
	decisionBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}
	// A request includes the agent's answer; streams run long.
	requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	// A push delivery includes queueing and retries with backoff.
	pushBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// New builds the metrics on a registry of their own, with the Go and process
// collectors, and the families read from the non-nil sources at scrape time.
func New(cfg config.Metrics, src Sources) *Metrics {
	reg := prometheus.NewRegistry()
	decisionLabels := []string{"route", "operation", "result", "mode"}
	if cfg.TenantLabels {
		decisionLabels = append(decisionLabels, labelTenant)
	}
	m := &Metrics{
		reg:     reg,
		tenants: cfg.TenantLabels,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameDecisions,
			Help: "Policy decisions by route, operation, result (allow, deny, dry_run, error) and mode."}, decisionLabels),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameDenials,
			Help: "Denial codes of denied and dry-run decisions (each code once per decision)."},
			[]string{"route", "operation", "code"}),
		decisionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: nameDecisionDuration,
			Help: "Time the policy decision alone took, by mode and decision-cache hit or miss.", Buckets: decisionBuckets},
			[]string{"mode", "cache"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: nameRequestDuration,
			Help: "Time to answer a request, end to end.", Buckets: requestBuckets},
			[]string{"route", "operation", "mode"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameRequests,
			Help: "Requests answered, by route, operation, HTTP status and mode."},
			[]string{"route", "operation", "status", "mode"}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: nameUpstreamDuration,
			Help: "Time the protected agent took to answer forwarded requests.", Buckets: requestBuckets},
			[]string{"route"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameTransitions,
			Help: "Task state changes recorded, by from and to state."}, []string{"from", "to"}),
		tasksCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: nameTasksCreated,
			Help: "Tasks recorded in the lifecycle store."}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameViolations,
			Help: "Illegal task transitions reported by an upstream agent (the stored state is kept)."},
			[]string{"route"}),
		pushDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: namePushDeliveries,
			Help: "Final outcomes of push notifications (delivered or failed)."}, []string{"result"}),
		pushAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: namePushAttempts,
			Help: "Push delivery attempts: delivered, retry (another attempt followed) or failed (the last one)."},
			[]string{"result"}),
		pushDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: namePushDuration,
			Help: "Time from enqueue to a push notification's final outcome, retries included.", Buckets: pushBuckets}),
		guardRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: namePushGuardRefusals,
			Help: "Push notifications the outbound guard refused, by reason."}, []string{"reason"}),
		extAuthz: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameExtAuthzChecks,
			Help: "Envoy ext_authz checks answered, by result (allow or deny)."}, []string{"result"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.decisions, m.denials, m.decisionDuration, m.requestDuration, m.requests, m.upstreamDuration,
		m.transitions, m.tasksCreated, m.violations,
		m.pushDeliveries, m.pushAttempts, m.pushDuration, m.guardRefusals, m.extAuthz,
	)
	if err := m.Attach(src); err != nil {
		panic(err) // unreachable: nothing is attached yet
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// Attach adds the families of src's non-nil sources to a running Metrics. It
// breaks the construction cycles: the proxy.Server takes the Metrics as its
// Hooks and the push.Deliverer takes PushAttempt and PushResult, so both can be
// attached once built. A source of a kind already attached is an error, and then
// nothing of src is attached.
func (m *Metrics) Attach(src Sources) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := &m.attached
	for _, dup := range []struct {
		kind      string
		have, add bool
	}{
		{"Engine", a.Engine != nil, src.Engine != nil}, {"Reloader", a.Reloader != nil, src.Reloader != nil},
		{"Identity", a.Identity != nil, src.Identity != nil}, {"Store", a.Store != nil, src.Store != nil},
		{"Push", a.Push != nil, src.Push != nil}, {"Proxy", a.Proxy != nil, src.Proxy != nil},
	} {
		if dup.have && dup.add {
			return fmt.Errorf("metrics: a %s source is already attached", dup.kind)
		}
	}
	m.registerSources(src)
	if src.Engine != nil {
		a.Engine = src.Engine
	}
	if src.Reloader != nil {
		a.Reloader = src.Reloader
	}
	if src.Identity != nil {
		a.Identity = src.Identity
	}
	if src.Store != nil {
		a.Store = src.Store
	}
	if src.Push != nil {
		a.Push = src.Push
	}
	if src.Proxy != nil {
		a.Proxy = src.Proxy
	}
	return nil
}

// registerSources adds the families read from the components at scrape time.
func (m *Metrics) registerSources(src Sources) {
	reg := m.reg
	counter := func(name, help string, labels prometheus.Labels, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(f()) })
	}
	if e := src.Engine; e != nil {
		reg.MustRegister(
			counter(nameDecisionCacheHits, "Decisions served from the decision cache.", nil,
				func() uint64 { h, _ := e.CacheStats(); return h }),
			counter(nameDecisionCacheMiss, "Decisions the decision cache did not hold (evaluated).", nil,
				func() uint64 { _, x := e.CacheStats(); return x }),
			&policyInfo{engine: e, desc: prometheus.NewDesc(namePolicyInfo,
				"The live policy revision (always 1).", []string{"revision"}, nil)},
		)
	}
	if r := src.Reloader; r != nil {
		const help = "Policy reload attempts by result (ok or failed: the last good policy keeps serving)."
		reg.MustRegister(
			counter(namePolicyReloads, help, prometheus.Labels{"result": reloadOK},
				func() uint64 { ok, _ := r.Counts(); return ok }),
			counter(namePolicyReloads, help, prometheus.Labels{"result": reloadFailed},
				func() uint64 { _, failed := r.Counts(); return failed }),
		)
	}
	if id := src.Identity; id != nil {
		reg.MustRegister(
			counter(nameTokenCacheHits, "Bearer tokens served from the verified-token cache.", nil,
				func() uint64 { h, _ := id.CacheStats(); return h }),
			counter(nameTokenCacheMiss, "Bearer tokens the verified-token cache did not hold (verified).", nil,
				func() uint64 { _, x := id.CacheStats(); return x }),
		)
	}
	if s := src.Store; s != nil {
		reg.MustRegister(&taskStates{store: s, desc: prometheus.NewDesc(nameTasks,
			"Tasks tracked in the lifecycle store, by state.", []string{"state"}, nil)})
	}
	if d := src.Push; d != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: namePushQueueDepth,
				Help: "Push notifications accepted and not yet finished."},
				func() float64 { return float64(d.Stats().Queued) }),
			counter(namePushDropped, "Push notifications refused because the delivery queue was full.", nil,
				func() uint64 { return d.Stats().Dropped }),
		)
		// The outcomes exist from the start, so rates and alerts see zeros.
		for _, r := range []string{resultDelivered, resultFailed} {
			m.pushDeliveries.WithLabelValues(r)
		}
		for _, r := range []string{resultDelivered, resultRetry, resultFailed} {
			m.pushAttempts.WithLabelValues(r)
		}
	}
	if p := src.Proxy; p != nil {
		st := p.Stats()
		reg.MustRegister(
			counter(nameUpstreamErrors, "Forwarded requests the agent did not answer (unreachable, timeout, broken answer).", nil,
				st.UpstreamErrors.Load),
			counter(nameUpstreamInvalid, "Agent answers that were too large or not valid for their protocol.", nil,
				st.InvalidUpstream.Load),
		)
	}
}

// Handler serves the registry in the Prometheus exposition formats, for /metrics.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the metrics' own registry, for adding collectors or gathering
// directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Decided implements proxy.Hooks: it counts the decision, its denial codes and its
// evaluation time.
func (m *Metrics) Decided(e proxy.DecisionEvent) {
	route, op, mode := e.Route, opLabel(e.Operation), modeLabel(e.Mode)
	result := resultAllow
	switch {
	case e.Error != "":
		result = resultError
	case e.DryRun:
		result = resultDryRun
	case !e.Allow:
		result = resultDeny
	}
	k := decisionKey{route: route, op: op, result: result, mode: mode}
	if m.tenants {
		k.tenant = e.Caller.Tenant
	}
	if c, ok := m.decisionKids.get(k, func() (prometheus.Counter, error) {
		if m.tenants {
			return m.decisions.GetMetricWithLabelValues(route, op, result, mode, k.tenant)
		}
		return m.decisions.GetMetricWithLabelValues(route, op, result, mode)
	}); ok {
		c.Inc()
	}
	if !e.Allow || e.DryRun {
		for i, d := range e.Denials {
			if seenCode(e.Denials[:i], d.Code) {
				continue
			}
			if c, ok := m.denialKids.get(denialKey{route, op, d.Code}, func() (prometheus.Counter, error) {
				return m.denials.GetMetricWithLabelValues(route, op, d.Code)
			}); ok {
				c.Inc()
			}
		}
	}
	m.evalObserver(mode, e.CacheHit).Observe(e.Eval.Seconds())
}

// evalObserver is the decision-duration child of a mode and cache outcome.
func (m *Metrics) evalObserver(mode string, hit bool) prometheus.Observer {
	i, j := 2, 0
	switch mode {
	case proxy.ModeSidecar:
		i = 0
	case proxy.ModeExtAuthz:
		i = 1
	}
	cache := "miss"
	if hit {
		j, cache = 1, "hit"
	}
	p := &m.evalKids[i][j]
	if o := p.Load(); o != nil {
		return *o
	}
	o := m.decisionDuration.WithLabelValues(mode, cache) // mode is one of three fixed values
	p.Store(&o)
	return o
}

// seenCode reports whether an earlier denial of the same decision had code.
func seenCode(earlier []task.Denial, code string) bool {
	for _, d := range earlier {
		if d.Code == code {
			return true
		}
	}
	return false
}

// Served implements proxy.Hooks: it counts the request by status, times it and
// its upstream part, and counts ext_authz checks.
func (m *Metrics) Served(e proxy.RequestEvent) {
	route, op, mode, status := e.Route, opLabel(e.Operation), modeLabel(e.Mode), statusLabel(e.Status)
	if kid, ok := m.requestKids.get(requestKey{route, op, status, mode}, func() (requestKid, error) {
		c, err := m.requests.GetMetricWithLabelValues(route, op, status, mode)
		if err != nil {
			return requestKid{}, err
		}
		o, err := m.requestDuration.GetMetricWithLabelValues(route, op, mode)
		return requestKid{c, o}, err
	}); ok {
		kid.count.Inc()
		kid.duration.Observe(e.Duration.Seconds())
	}
	if e.Upstream > 0 {
		if o, ok := m.upstreamKids.get(route, func() (prometheus.Observer, error) {
			return m.upstreamDuration.GetMetricWithLabelValues(route)
		}); ok {
			o.Observe(e.Upstream.Seconds())
		}
	}
	if e.Mode == proxy.ModeExtAuthz {
		result := resultDeny
		if e.Status == http.StatusOK {
			result = resultAllow
		}
		m.extAuthz.WithLabelValues(result).Inc()
	}
}

// TaskChanged implements proxy.Hooks: it counts created tasks, state transitions
// and protocol violations. Artifact events are not counted.
func (m *Metrics) TaskChanged(e proxy.TaskEvent) {
	switch e.Kind {
	case proxy.TaskCreated:
		m.tasksCreated.Inc()
	case proxy.TaskStateChanged:
		m.transitions.WithLabelValues(stateLabel(e.From), stateLabel(e.To)).Inc()
	case proxy.TaskViolation:
		if c, err := m.violations.GetMetricWithLabelValues(e.Route); err == nil {
			c.Inc()
		}
	}
}

// PushAttempt counts one delivery attempt; wire it to
// push.DelivererConfig.OnAttempt. A delivered attempt counts at once; a failed
// one counts as retry when the next attempt of the same notification reports,
// or as failed with the notification's final outcome (PushResult), so at rest
// the three results add up to the attempts made.
func (m *Metrics) PushAttempt(r push.Result) {
	if r.Attempts > 1 {
		m.pushAttempts.WithLabelValues(resultRetry).Inc()
	}
	if r.Delivered {
		m.pushAttempts.WithLabelValues(resultDelivered).Inc()
	}
}

// PushResult counts a notification's final outcome, its latency and any guard
// refusal; wire it to push.DelivererConfig.OnResult.
func (m *Metrics) PushResult(r push.Result) {
	result := resultDelivered
	if !r.Delivered {
		result = resultFailed
		if r.Attempts > 0 {
			m.pushAttempts.WithLabelValues(resultFailed).Inc()
		}
		var refused *push.RefusedError
		if errors.As(r.Err, &refused) {
			if c, err := m.guardRefusals.GetMetricWithLabelValues(refused.Reason); err == nil {
				c.Inc()
			}
		}
	}
	m.pushDeliveries.WithLabelValues(result).Inc()
	m.pushDuration.Observe(r.Latency.Seconds())
}

// opLabel bounds the operation label to writ's vocabulary.
func opLabel(o task.Operation) string {
	switch o {
	case task.OpSend, task.OpStream, task.OpGet, task.OpList, task.OpCancel, task.OpSubscribe,
		task.OpPushSet, task.OpPushGet, task.OpPushList, task.OpPushDelete,
		task.OpCard, task.OpExtendedCard, task.OpDiscover, "":
		return string(o)
	}
	return labelUnknown
}

// modeLabel bounds the mode label to the proxy's modes.
func modeLabel(mode string) string {
	switch mode {
	case proxy.ModeSidecar, proxy.ModeExtAuthz:
		return mode
	}
	return labelUnknown
}

// stateLabel bounds a state label to the kernel's states.
func stateLabel(s task.State) string {
	if s.Valid() {
		return string(s)
	}
	return labelUnknown
}

// statusLabels are the HTTP status codes as strings, so that the request path
// does not allocate one.
var statusLabels = func() (out [600]string) {
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// statusLabel is the status code as a label; anything outside 0-599 is "other".
func statusLabel(code int) string {
	if code >= 0 && code < len(statusLabels) {
		return statusLabels[code]
	}
	return labelUnknown
}

// taskStates exports writ_tasks{state} from one Store.Stats call per scrape, one
// series per kernel state.
type taskStates struct {
	store *task.MemoryStore
	desc  *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *taskStates) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *taskStates) Collect(ch chan<- prometheus.Metric) {
	st, err := c.store.Stats(context.Background())
	if err != nil {
		return // the store is down: no series rather than wrong ones
	}
	by := st.ByState
	for _, s := range task.States {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(by[s]), string(s))
	}
}

// policyInfo exports writ_policy_info{revision} = 1 for the revision serving at
// scrape time, so a reload moves it.
type policyInfo struct {
	engine *authz.Engine
	desc   *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *policyInfo) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *policyInfo) Collect(ch chan<- prometheus.Metric) {
	p := c.engine.Policy()
	if p == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, p.Revision)
}
