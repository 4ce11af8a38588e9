// Package metrics exports writ's Prometheus metrics (writ_*) from the events
// the admission core emits and from the live components' counters, read at
// scrape time through small interfaces: it never imports the core.
package metrics

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

// Sources are the live components whose counters are read at scrape time,
// each through the one method metrics needs. Every field is optional: the
// families of a nil source are not exported.
type Sources struct {
	// DecisionCache gives the decision-cache counters (authz.Engine).
	DecisionCache interface{ CacheStats() (hits, misses uint64) }
	// Policy gives the live policy revision (authz.Engine).
	Policy interface{ Revision() string }
	// Reloads gives the policy reload counts (authz.Reloader).
	Reloads interface{ Counts() (ok, failed uint64) }
	// TokenCache gives the verified-token cache counters (identity.Resolver).
	TokenCache interface{ CacheStats() (hits, misses uint64) }
	// Store gives the number of tasks tracked in each state (a task.Store).
	Store interface {
		Stats(context.Context) (task.StoreStats, error)
	}
	// Push gives the delivery queue's depth and overflow count (push.Deliverer).
	Push interface {
		QueueStats() (queued int, dropped uint64)
	}
	// Shadow gives the shadow policy set's evaluations by result
	// (authz.Shadow; only when policies_shadow: is set).
	Shadow interface {
		Tally() (agree, disagree, errored, dropped uint64)
	}
	// Upload gives decision_log.upload's counts (fleet.Plugins;
	// only with the key set).
	Upload interface{ UploadTally() UploadTally }
	// Lifecycle gives the lifecycle store errors the core met, and the store
	// operations its callers' cancellations cut short (proxy.Core).
	Lifecycle interface {
		StoreErrors() uint64
		StoreCancellations() uint64
	}
	// Components gives the errors writ's own parts met starting, serving
	// and stopping (a listener that stopped serving, a decision log that
	// could not be flushed, a store that did not close), by part: each
	// calls f once per part it runs, zeros included (the assembly,
	// server.Server).
	Components interface {
		ComponentErrors(f func(component string, n uint64))
	}
}

// Metrics is writ's metrics: a registry of its own holding the writ_ families, the
// Go and process collectors, and the hooks that feed the event-driven families.
// It implements proxy.Hooks; every method is safe for concurrent use and never
// blocks.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	tenants bool

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
	upstreamErrors   *prometheus.CounterVec
	upstreamInvalid  prometheus.Counter
	evictions        *prometheus.CounterVec
	exchanges        *prometheus.CounterVec
	shadowDisagree   *prometheus.CounterVec // code, direction
	shadowCodesMu    sync.Mutex
	shadowCodes      map[string]bool // the code labels seen, at most maxShadowCodes
	exchangeDuration *prometheus.HistogramVec

	// The request path's children, cached by their label values: a lock-free
	// read instead of the vectors' label hashing and validation.
	decisionKids children[decisionKey, prometheus.Counter]
	denialKids   children[denialKey, prometheus.Counter]
	requestKids  children[requestKey, requestKid]
	upstreamKids children[string, prometheus.Observer]
	evalKids     [][2]atomic.Pointer[prometheus.Observer] // mode index (events.Modes, then other) × cache hit
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

var _ events.Sink = (*Metrics)(nil)

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
	nameStoreErrors        = "writ_store_errors_total"
	nameStoreCancellations = "writ_store_cancellations_total"
	nameEvictions          = "writ_task_evictions_total"
	nameComponentErrors    = "writ_component_errors_total"
	nameExchanges          = "writ_token_exchanges_total"
	nameExchangeDuration   = "writ_token_exchange_duration_seconds"
	nameShadowDisagree     = "writ_shadow_disagreements_total"
	nameShadowEvaluations  = "writ_shadow_evaluations_total"
	nameUploads            = "writ_decision_log_uploads_total"
	nameUploadDropped      = "writ_decision_log_upload_dropped_total"
	nameUploadBuffered     = "writ_decision_log_upload_buffered_bytes"
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
	namePolicyReloads, namePolicyInfo, nameExtAuthzChecks, nameStoreErrors, nameStoreCancellations, nameEvictions, nameComponentErrors,
	nameExchanges, nameExchangeDuration, nameShadowDisagree, nameShadowEvaluations,
	nameUploads, nameUploadDropped, nameUploadBuffered,
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
		reg:      reg,
		tenants:  cfg.TenantLabels,
		evalKids: make([][2]atomic.Pointer[prometheus.Observer], len(events.Modes)+1),
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
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameUpstreamErrors,
			Help: "Forwarded requests the agent did not answer (unreachable, timeout, broken answer)."}, []string{}),
		upstreamInvalid: prometheus.NewCounter(prometheus.CounterOpts{Name: nameUpstreamInvalid,
			Help: "Agent answers (or stream events) that were too large or not valid for their protocol."}),
		exchanges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameExchanges,
			Help: "Outbound tokens the egress door obtained by RFC 8693 token exchange, by outcome (issued, cache_hit, failed) and the failure's kind."},
			[]string{"outcome", "error"}),
		exchangeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: nameExchangeDuration,
			Help: "Time a token exchange at the STS took (cache hits not included), by outcome (issued or failed).", Buckets: requestBuckets},
			[]string{"outcome"}),
		shadowDisagree: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameShadowDisagree,
			Help: "Decisions the shadow policy set (policies_shadow) would have made otherwise, by the first code that differs and direction (allow_to_deny, deny_to_allow, codes)."},
			[]string{"code", "direction"}),
		shadowCodes: map[string]bool{},
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: nameEvictions,
			Help: "Live tasks and contexts the lifecycle store dropped to honour its bounds, by reason."}, []string{"reason"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.decisions, m.denials, m.decisionDuration, m.requestDuration, m.requests, m.upstreamDuration,
		m.transitions, m.tasksCreated, m.violations,
		m.pushDeliveries, m.pushAttempts, m.pushDuration, m.guardRefusals, m.extAuthz,
		m.upstreamErrors, m.upstreamInvalid, m.evictions, m.exchanges, m.exchangeDuration, m.shadowDisagree,
	)
	// These exist from the start, so rates and alerts see zeros.
	m.upstreamErrors.WithLabelValues()
	for _, o := range []string{events.ExchangeIssued, events.ExchangeCacheHit} {
		m.exchanges.WithLabelValues(o, "")
	}
	for _, o := range []string{events.ExchangeIssued, events.ExchangeFailed} {
		m.exchangeDuration.WithLabelValues(o)
	}
	for _, r := range []string{task.EvictedStoreFull, task.EvictedOwnerFull} {
		m.evictions.WithLabelValues(r)
	}
	m.registerSources(src)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// registerSources adds the families read from the components at scrape time.
func (m *Metrics) registerSources(src Sources) {
	reg := m.reg
	counter := func(name, help string, labels prometheus.Labels, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(f()) })
	}
	if e := src.DecisionCache; e != nil {
		reg.MustRegister(
			counter(nameDecisionCacheHits, "Decisions served from the decision cache.", nil,
				func() uint64 { h, _ := e.CacheStats(); return h }),
			counter(nameDecisionCacheMiss, "Decisions the decision cache did not hold (evaluated).", nil,
				func() uint64 { _, x := e.CacheStats(); return x }),
		)
	}
	if p := src.Policy; p != nil {
		reg.MustRegister(&policyInfo{policy: p, desc: prometheus.NewDesc(namePolicyInfo,
			"The live policy revision (always 1).", []string{"revision"}, nil)})
	}
	if r := src.Reloads; r != nil {
		const help = "Policy reload attempts by result (ok or failed: the last good policy keeps serving)."
		reg.MustRegister(
			counter(namePolicyReloads, help, prometheus.Labels{"result": reloadOK},
				func() uint64 { ok, _ := r.Counts(); return ok }),
			counter(namePolicyReloads, help, prometheus.Labels{"result": reloadFailed},
				func() uint64 { _, failed := r.Counts(); return failed }),
		)
	}
	if sh := src.Shadow; sh != nil {
		const help = "Shadow policy evaluations by result: agree, disagree, error (the shadow failed; the live decision stood) or dropped (its queue was full)."
		reg.MustRegister(
			counter(nameShadowEvaluations, help, prometheus.Labels{"result": "agree"},
				func() uint64 { a, _, _, _ := sh.Tally(); return a }),
			counter(nameShadowEvaluations, help, prometheus.Labels{"result": "disagree"},
				func() uint64 { _, d, _, _ := sh.Tally(); return d }),
			counter(nameShadowEvaluations, help, prometheus.Labels{"result": "error"},
				func() uint64 { _, _, e, _ := sh.Tally(); return e }),
			counter(nameShadowEvaluations, help, prometheus.Labels{"result": "dropped"},
				func() uint64 { _, _, _, x := sh.Tally(); return x }),
		)
	}
	if up := src.Upload; up != nil {
		const help = "Uploads of decision batches (gzip'd chunks) to the decision_log.upload collector, by result (a failed one keeps its batch for the next)."
		const dropHelp = "Decisions not shipped to the collector, by reason: queue (its queue was full), buffer (batches dropped from a full buffer: counted once per drop), failed (not encodable). The local decision log has them all."
		reg.MustRegister(
			counter(nameUploads, help, prometheus.Labels{"result": "uploaded"}, func() uint64 { return up.UploadTally().ChunksUploaded }),
			counter(nameUploads, help, prometheus.Labels{"result": "failed"}, func() uint64 { return up.UploadTally().ChunksFailed }),
			counter(nameUploadDropped, dropHelp, prometheus.Labels{"reason": "queue"}, func() uint64 { return up.UploadTally().QueueDropped }),
			counter(nameUploadDropped, dropHelp, prometheus.Labels{"reason": "buffer"}, func() uint64 { return up.UploadTally().BufferDrops }),
			counter(nameUploadDropped, dropHelp, prometheus.Labels{"reason": "failed"}, func() uint64 { return up.UploadTally().Failed }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: nameUploadBuffered,
				Help: "Compressed decision batches waiting for an upload to the collector, in bytes."},
				func() float64 { return float64(up.UploadTally().Buffered) }),
		)
	}
	if id := src.TokenCache; id != nil {
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
	if l := src.Lifecycle; l != nil {
		reg.MustRegister(counter(nameStoreErrors,
			"Lifecycle store operations that failed (requests that needed them were refused, fail closed).", nil, l.StoreErrors),
			counter(nameStoreCancellations,
				"Lifecycle store operations cut short by the caller's own cancellation (the caller went away; no fault of the store).",
				nil, l.StoreCancellations))
	}
	if c := src.Components; c != nil {
		reg.MustRegister(&componentErrors{src: c, desc: prometheus.NewDesc(nameComponentErrors,
			"Errors writ's own parts met starting, serving and stopping (a listener that stopped serving, "+
				"a decision log not flushed, a store not closed cleanly), by component.", []string{"component"}, nil)})
	}
	if d := src.Push; d != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: namePushQueueDepth,
				Help: "Push notifications accepted and not yet finished."},
				func() float64 { q, _ := d.QueueStats(); return float64(q) }),
			counter(namePushDropped, "Push notifications refused because the delivery queue was full.", nil,
				func() uint64 { _, dropped := d.QueueStats(); return dropped }),
		)
		// The outcomes exist from the start, so rates and alerts see zeros.
		for _, r := range []string{resultDelivered, resultFailed} {
			m.pushDeliveries.WithLabelValues(r)
		}
		for _, r := range []string{resultDelivered, resultRetry, resultFailed} {
			m.pushAttempts.WithLabelValues(r)
		}
	}
}

// Handler serves the registry in the Prometheus exposition formats, for /metrics.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the metrics' own registry, for adding collectors or gathering
// directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Decided implements events.Sink: it counts the decision, its denial codes and
// its evaluation time.
func (m *Metrics) Decided(e events.Decision) {
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
	i, j := len(events.Modes), 0
	if k := slices.Index(events.Modes, mode); k >= 0 {
		i = k
	}
	cache := "miss"
	if hit {
		j, cache = 1, "hit"
	}
	p := &m.evalKids[i][j]
	if o := p.Load(); o != nil {
		return *o
	}
	o := m.decisionDuration.WithLabelValues(mode, cache) // mode is one of events.Modes (or unknown)
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

// Served implements events.Sink: it counts the request by status, times it and
// its upstream part, counts upstream failures and ext_authz checks.
func (m *Metrics) Served(e events.Request) {
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
	if e.UpstreamFailure != "" {
		m.upstreamErrors.WithLabelValues().Inc()
	}
	if e.InvalidAnswers > 0 {
		m.upstreamInvalid.Add(float64(e.InvalidAnswers))
	}
	if e.Mode == events.ModeExtAuthz {
		result := resultDeny
		if e.Status == http.StatusOK {
			result = resultAllow
		}
		m.extAuthz.WithLabelValues(result).Inc()
	}
}

// TaskChanged implements events.Sink: it counts created tasks, state
// transitions, protocol violations and evictions. Artifact events are not
// counted.
func (m *Metrics) TaskChanged(e events.Task) {
	switch e.Kind {
	case events.TaskCreated:
		m.tasksCreated.Inc()
	case events.TaskStateChanged:
		m.transitions.WithLabelValues(stateLabel(e.From), stateLabel(e.To)).Inc()
	case events.TaskViolation:
		if c, err := m.violations.GetMetricWithLabelValues(e.Route); err == nil {
			c.Inc()
		}
	case events.TaskEvicted:
		m.evictions.WithLabelValues(evictionLabel(e.Reason)).Inc()
	}
}

// Pushed implements events.Sink. An attempt: a delivered one counts at once; a
// failed one counts as retry when the next attempt of the same notification
// reports, or as failed with the notification's final outcome, so at rest the
// three results add up to the attempts made. An outcome: counted with its
// latency and any guard refusal.
func (m *Metrics) Pushed(e events.Push) {
	if !e.Final {
		if e.Attempt > 1 {
			m.pushAttempts.WithLabelValues(resultRetry).Inc()
		}
		if e.Delivered {
			m.pushAttempts.WithLabelValues(resultDelivered).Inc()
		}
		return
	}
	result := resultDelivered
	if !e.Delivered {
		result = resultFailed
		if e.Attempt > 0 {
			m.pushAttempts.WithLabelValues(resultFailed).Inc()
		}
		if e.Refused != "" {
			if c, err := m.guardRefusals.GetMetricWithLabelValues(e.Refused); err == nil {
				c.Inc()
			}
		}
	}
	m.pushDeliveries.WithLabelValues(result).Inc()
	m.pushDuration.Observe(e.Latency.Seconds())
}

var _ events.ExchangeSink = (*Metrics)(nil)

// Exchanged implements events.ExchangeSink: every outbound token the egress
// door asked for, by outcome and, for a failure, its kind (a bounded set:
// the exchanger maps an STS's own error codes onto the registered ones); the
// STS round trips' times (a cache hit is a lookup, not timed here).
func (m *Metrics) Exchanged(e events.Exchange) {
	kind := ""
	if e.Outcome == events.ExchangeFailed {
		kind = e.Error
		if kind == "" {
			kind = labelUnknown
		}
	}
	if c, err := m.exchanges.GetMetricWithLabelValues(e.Outcome, kind); err == nil {
		c.Inc()
	}
	if e.Outcome != events.ExchangeCacheHit && !e.Shared {
		if o, err := m.exchangeDuration.GetMetricWithLabelValues(e.Outcome); err == nil {
			o.Observe(e.Latency.Seconds())
		}
	}
}

var _ events.ShadowSink = (*Metrics)(nil)

// maxShadowCodes bounds the code label of writ_shadow_disagreements_total:
// the codes are the policies' own, and a shadow set is a draft.
const maxShadowCodes = 64

// ShadowDisagreed implements events.ShadowSink: one disagreement, by its
// first differing code (the first maxShadowCodes codes seen; "other"
// after) and direction.
func (m *Metrics) ShadowDisagreed(e events.ShadowDisagreement) {
	dir := e.Direction
	switch dir {
	case "allow_to_deny", "deny_to_allow", "codes":
	default:
		dir = labelUnknown
	}
	code := m.shadowCode(e.Code)
	if c, err := m.shadowDisagree.GetMetricWithLabelValues(code, dir); err == nil {
		c.Inc()
	}
}

// shadowCode bounds a disagreement's code label.
func (m *Metrics) shadowCode(code string) string {
	m.shadowCodesMu.Lock()
	defer m.shadowCodesMu.Unlock()
	if m.shadowCodes[code] {
		return code
	}
	if len(m.shadowCodes) >= maxShadowCodes {
		return labelUnknown
	}
	m.shadowCodes[code] = true
	return code
}

// evictionLabel bounds the eviction reason label.
func evictionLabel(r string) string {
	switch r {
	case task.EvictedStoreFull, task.EvictedOwnerFull:
		return r
	}
	return labelUnknown
}

// opLabel bounds the operation label to writ's vocabulary (task.Operations).
func opLabel(o task.Operation) string {
	if o == "" || o.Known() {
		return string(o)
	}
	return labelUnknown
}

// modeLabel bounds the mode label to the front doors' modes (events.Modes).
func modeLabel(mode string) string {
	if slices.Contains(events.Modes, mode) {
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
	store interface {
		Stats(context.Context) (task.StoreStats, error)
	}
	desc *prometheus.Desc
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
	policy interface{ Revision() string }
	desc   *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *policyInfo) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *policyInfo) Collect(ch chan<- prometheus.Metric) {
	if rev := c.policy.Revision(); rev != "" {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, rev)
	}
}

// componentErrors exports writ_component_errors_total{component} from the
// assembly's counts, read at scrape time.
type componentErrors struct {
	src interface {
		ComponentErrors(f func(component string, n uint64))
	}
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *componentErrors) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *componentErrors) Collect(ch chan<- prometheus.Metric) {
	c.src.ComponentErrors(func(component string, n uint64) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), component)
	})
}

// UploadTally is what Sources.Upload gives: the decisions shipped to the
// decision_log.upload collector and those that were not.
type UploadTally struct {
	ChunksUploaded, ChunksFailed      uint64
	QueueDropped, BufferDrops, Failed uint64
	Buffered                          int64
}
