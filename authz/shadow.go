package authz

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The results a shadow evaluation is counted under
// (writ_shadow_evaluations_total{result}).
const (
	ShadowAgree    = "agree"
	ShadowDisagree = "disagree"
	ShadowError    = "error"
	ShadowDropped  = "dropped"
)

// The directions of a disagreement: what the shadow would have done to the
// live answer.
const (
	ShadowAllowToDeny = "allow_to_deny" // the live set allowed, the shadow would deny
	ShadowDenyToAllow = "deny_to_allow" // the live set denied, the shadow would allow
	ShadowCodes       = "codes"         // both deny, for different codes
)

// ShadowVerdict is one set's side of a shadow comparison: the policy's own
// verdict (a dry-run pass is the denial it would have been).
type ShadowVerdict struct {
	Allow    bool
	Codes    []string // the denial codes, sorted, each once
	Revision string
}

// ShadowDisagreement is a decision the shadow set would have made otherwise.
type ShadowDisagreement struct {
	Time       time.Time
	DecisionID string
	// Route and Operation are the input's target and operation.
	Route, Operation string
	Live, Shadow     ShadowVerdict
	// Direction is ShadowAllowToDeny, ShadowDenyToAllow or ShadowCodes;
	// Code the first code that differs (the shadow's for allow_to_deny and
	// codes when it has one, the live set's otherwise).
	Direction, Code string
}

// ShadowCounts counts shadow evaluations by result.
type ShadowCounts struct {
	Agree, Disagree, Error, Dropped uint64
}

// Shadow decides every live decision's input a second time with another
// policy set, on its own worker after the live decision was made, and
// reports where the two disagree. It never changes a live decision: Offer
// only queues, and a full queue drops the evaluation (counted), so a slow
// or failing shadow costs the request path one non-blocking send.
type Shadow struct {
	engine   *Engine
	queue    chan shadowJob
	report   func(ShadowDisagreement)
	log      *slog.Logger
	mu       sync.RWMutex // closed, against sends on a closed queue
	closed   bool
	done     chan struct{}
	agree    atomic.Uint64
	disagree atomic.Uint64
	errs     atomic.Uint64
	dropped  atomic.Uint64
	// before, when set (tests), runs before each shadow evaluation.
	before func()
}

type shadowJob struct {
	in   *Input
	live Decision
}

// ShadowOptions configure a Shadow.
type ShadowOptions struct {
	// Queue bounds the evaluations waiting for the worker (> 0).
	Queue int
	// Report receives each disagreement, on the shadow's worker.
	Report func(ShadowDisagreement)
	Logger *slog.Logger
}

// NewShadow starts a shadow of engine's policy (the engine's own; reload it
// with a Reloader of that engine). Close stops it.
func NewShadow(engine *Engine, opt ShadowOptions) *Shadow {
	if opt.Queue < 1 {
		opt.Queue = 1
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	s := &Shadow{engine: engine, queue: make(chan shadowJob, opt.Queue), report: opt.Report, log: opt.Logger,
		done: make(chan struct{})}
	go s.work()
	return s
}

// Policy is the shadow policy set serving now.
func (s *Shadow) Policy() *Policy { return s.engine.Policy() }

// Engine is the shadow's engine (its revision, its reloader's engine).
func (s *Shadow) Engine() *Engine { return s.engine }

// Counts returns the evaluations by result since the start.
func (s *Shadow) Counts() ShadowCounts {
	return ShadowCounts{Agree: s.agree.Load(), Disagree: s.disagree.Load(), Error: s.errs.Load(), Dropped: s.dropped.Load()}
}

// Tally is Counts as the metrics read it.
func (s *Shadow) Tally() (agree, disagree, errored, dropped uint64) {
	c := s.Counts()
	return c.Agree, c.Disagree, c.Error, c.Dropped
}

// Offer queues in, decided live as live, for the shadow; it never blocks.
// The caller must not modify in afterwards.
func (s *Shadow) Offer(in *Input, live Decision) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.queue <- shadowJob{in: in, live: live}:
	default:
		s.dropped.Add(1)
	}
}

// Close stops taking evaluations and waits, until ctx ends, for the worker
// to finish those queued (what is left when ctx ends is not evaluated).
func (s *Shadow) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Shadow) work() {
	defer close(s.done)
	for j := range s.queue {
		s.evaluate(j)
	}
}

// evaluate decides one input with the shadow set and compares.
func (s *Shadow) evaluate(j shadowJob) {
	if s.before != nil {
		s.before()
	}
	d, err := s.engine.Decide(context.Background(), j.in)
	if err != nil {
		s.errs.Add(1)
		s.log.Warn("shadow policy error; the live decision stands", "decision_id", j.live.ID,
			"shadow_revision", d.Revision, "error", err)
		return
	}
	live, shadow := verdictOf(j.live), verdictOf(d)
	dir, code, same := compareVerdicts(live, shadow)
	if same {
		s.agree.Add(1)
		return
	}
	s.disagree.Add(1)
	if s.report != nil {
		s.report(ShadowDisagreement{Time: time.Now(), DecisionID: j.live.ID, Route: j.in.Target.Name,
			Operation: j.in.Operation, Live: live, Shadow: shadow, Direction: dir, Code: code})
	}
}

// verdictOf is a decision as the policy made it: a dry-run pass is the
// denial it stands for.
func verdictOf(d Decision) ShadowVerdict {
	v := ShadowVerdict{Allow: d.Allow && !d.DryRun, Revision: d.Revision}
	if !v.Allow {
		for _, x := range d.Denials {
			v.Codes = append(v.Codes, x.Code)
		}
		slices.Sort(v.Codes)
		v.Codes = slices.Compact(v.Codes)
	}
	return v
}

// compareVerdicts says whether live and shadow agree, and if not how.
func compareVerdicts(live, shadow ShadowVerdict) (dir, code string, same bool) {
	switch {
	case live.Allow && shadow.Allow:
		return "", "", true
	case live.Allow:
		return ShadowAllowToDeny, first(shadow.Codes), false
	case shadow.Allow:
		return ShadowDenyToAllow, first(live.Codes), false
	case slices.Equal(live.Codes, shadow.Codes):
		return "", "", true
	}
	for _, c := range shadow.Codes {
		if !slices.Contains(live.Codes, c) {
			return ShadowCodes, c, false
		}
	}
	for _, c := range live.Codes {
		if !slices.Contains(shadow.Codes, c) {
			return ShadowCodes, c, false
		}
	}
	return ShadowCodes, "", false
}

func first(codes []string) string {
	if len(codes) == 0 {
		return ""
	}
	return codes[0]
}

// Shadowed is a decision point that decides with its live engine and
// offers each decision to a shadow: what the core calls when
// policies_shadow: is set. Its answers are the live engine's, unchanged.
type Shadowed struct {
	*Engine
	Shadow *Shadow
}

// Decide implements the core's Decider: the live decision, then the input
// queued for the shadow (never waited for).
func (s Shadowed) Decide(ctx context.Context, in *Input) (Decision, error) {
	d, err := s.Engine.Decide(ctx, in)
	s.Shadow.Offer(in, d)
	return d, err
}
