package authz

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/writ-authz/writ/authz/internal/segcache"
	"github.com/writ-authz/writ/task"
)

// PolicyErrorCode is the denial code of a decision that could not be made (the
// policy errored or left the decision undefined): writ fails closed.
const PolicyErrorCode = "POLICY_ERROR"

// Decision is the outcome of one policy evaluation. A denial is not an error: it is
// a Decision with Allow false and every failed check in Denials. Decisions come from
// a shared cache; treat them as read-only.
type Decision struct {
	ID       string
	Allow    bool
	Denials  []task.Denial
	Headers  map[string]string
	Revision string
	CacheHit bool
	// Duration is how long the decision took (the cache lookup, or the evaluation).
	Duration time.Duration
	// DryRun is set when the policy denied but dry-run mode let the request pass;
	// Denials then hold the would-be denials.
	DryRun bool
}

// Options configure an Engine.
type Options struct {
	// CacheSize bounds the decision cache (entries). 0 means DefaultCacheSize; a
	// negative size disables the cache.
	CacheSize int
	// CacheBytes bounds the decision cache's estimated heap. 0 means
	// DefaultCacheBytes; a negative value bounds entries only.
	CacheBytes int
	// DryRun lets every request pass and logs the decisions that would have denied.
	DryRun bool
	Logger *slog.Logger
}

// DefaultCacheSize is the decision cache's default bound.
const DefaultCacheSize = 10000

// DefaultCacheBytes is the decision cache's default heap bound: room for the
// default 10,000 entries with a few long denial reasons each.
const DefaultCacheBytes = 8 << 20

// Engine evaluates decisions against the current policy. It is safe for concurrent
// use; Swap replaces the policy atomically while decisions are in flight.
type Engine struct {
	policy atomic.Pointer[Policy]
	// cache holds decisions by key. A decision seen once waits in its small
	// probation segment; only one asked for again stays (segcache), so keys
	// that never repeat do not grow the heap.
	cache  *segcache.Cache[[32]byte, Decision]
	hits   atomic.Uint64
	misses atomic.Uint64
	// rules caches the results of the policy's other rules (rule.go), with
	// the decision cache's bounds; nil when that cache is off.
	rules                *segcache.Cache[[32]byte, ruleResult]
	ruleHits, ruleMisses atomic.Uint64
	dryRun               bool
	log                  *slog.Logger
}

// NewEngine returns an engine serving p.
func NewEngine(p *Policy, opt Options) (*Engine, error) {
	if p == nil {
		return nil, errors.New("no policy")
	}
	e := &Engine{dryRun: opt.DryRun, log: opt.Logger}
	if e.log == nil {
		e.log = slog.Default()
	}
	size := opt.CacheSize
	if size == 0 {
		size = DefaultCacheSize
	}
	bytes := opt.CacheBytes
	if bytes == 0 {
		bytes = DefaultCacheBytes
	}
	if size > 0 {
		c, err := segcache.New[[32]byte, Decision](size, bytes, decisionBytes)
		if err != nil {
			return nil, fmt.Errorf("decision cache: %w", err)
		}
		e.cache = c
		if e.rules, err = segcache.New[[32]byte, ruleResult](size, bytes, ruleResultBytes); err != nil {
			return nil, fmt.Errorf("rule cache: %w", err)
		}
	}
	e.policy.Store(p)
	return e, nil
}

// Policy returns the policy currently serving.
func (e *Engine) Policy() *Policy { return e.policy.Load() }

// Revision is the revision of the policy currently serving.
func (e *Engine) Revision() string {
	if p := e.policy.Load(); p != nil {
		return p.Revision
	}
	return ""
}

// Swap makes p the serving policy. The residuals of the targets the old policy
// served are built first, so the swap does not slow their next decisions down.
// Cached decisions of the old revision can never match again (the revision is
// part of every key); they are purged to free memory.
func (e *Engine) Swap(p *Policy) {
	if old := e.policy.Load(); old != nil && old != p {
		p.prepare(context.Background(), old, e.log)
	}
	e.policy.Store(p)
	if e.cache != nil {
		e.cache.Purge()
	}
	if e.rules != nil {
		e.rules.Purge()
	}
}

// CacheStats returns the decision cache's hit and miss counts.
func (e *Engine) CacheStats() (hits, misses uint64) { return e.hits.Load(), e.misses.Load() }

// Decide evaluates the policy on in. It always returns a usable decision: when
// evaluation fails the decision denies with POLICY_ERROR (or passes in dry-run),
// and the error says why, for the log.
//
// The cache key covers only what the program that decides can read of the
// input (see reads.go and keyOn): the residual of the input's target,
// operation and task id when there is one, else the whole policy. Two inputs
// that differ elsewhere share a decision. A policy that calls a
// nondeterministic built-in (time, randomness, HTTP) is never cached.
func (e *Engine) Decide(ctx context.Context, in *Input) (Decision, error) {
	start := time.Now()
	p := e.policy.Load()
	tp, prog := p.program(ctx, in, e.log)
	cache := e.cache != nil && !p.reads.nondeterministic
	var key [32]byte
	if cache {
		key = p.keyOn(tp, prog, in)
		if d, ok := e.cache.Get(key); ok {
			e.hits.Add(1)
			d.ID, d.CacheHit, d.Duration = newID(), true, time.Since(start)
			return e.finish(d), nil
		}
		e.misses.Add(1)
	}
	d, keyed, err := p.decide(ctx, tp, prog, in, e.log)
	d.Revision = p.Revision
	if err != nil {
		d = Decision{Revision: p.Revision, Denials: []task.Denial{{Code: PolicyErrorCode, Reason: err.Error()}}}
	} else if cache && keyed {
		e.cache.Add(key, d)
	}
	d.ID, d.Duration = newID(), time.Since(start)
	return e.finish(d), err
}

// finish applies dry-run: the request passes, the would-be denial is logged.
func (e *Engine) finish(d Decision) Decision {
	if e.dryRun && !d.Allow {
		e.log.Warn("dry-run: request would be denied", "decision_id", d.ID, "denials", d.Denials, "revision", d.Revision)
		d.Allow, d.DryRun = true, true
	}
	return d
}

// program is what decides in: the residual of its target, operation and
// task id (tp, and its program; nil when it has none), or the whole policy
// (tp nil).
func (p *Policy) program(ctx context.Context, in *Input, log *slog.Logger) (*targetProgram, *program) {
	tp := p.forTarget(ctx, &in.Target, in.Operation, in.Task.ID != "", log)
	if tp == nil {
		return nil, nil
	}
	return tp, tp.prog.Load()
}

// decide evaluates in on prog, the residual tp holds, or on the whole
// policy when there is none. A residual's first decisions are also evaluated
// on the whole policy; a residual that disagrees is dropped for good, and
// the whole policy's decision is not to be cached under the residual's key
// (keyed false): what the residual reads cannot be trusted to be what
// decides.
func (p *Policy) decide(ctx context.Context, tp *targetProgram, prog *program, in *Input, log *slog.Logger) (d Decision, keyed bool, err error) {
	if prog == nil {
		d, err = p.decision(ctx, p.full, p.value(in, nil))
		return d, true, err
	}
	d, err = p.decision(ctx, prog, prog.view.value(p.Revision, in, prog.tv))
	if tp.checks.Load() > 0 && tp.checks.Add(-1) >= 0 {
		fd, ferr := p.decision(ctx, p.full, p.value(in, nil))
		if !sameDecision(d, err, fd, ferr) {
			tp.prog.CompareAndSwap(prog, nil)
			if log == nil {
				log = slog.Default()
			}
			log.Error("the partially evaluated policy disagreed with the whole policy; the target is evaluated whole from now on",
				"target", in.Target.Name, "operation", tp.op, "names_task", tp.named, "revision", p.Revision,
				"residual", d, "whole", fd, "residual_error", err, "whole_error", ferr)
			return fd, false, ferr
		}
	}
	return d, true, err
}

// evaluate decides in on the whole policy and the whole input (no partial
// evaluation, no pruning): the reference the faster paths are tested against.
func evaluate(ctx context.Context, p *Policy, in *Input) (Decision, error) {
	return p.decision(ctx, p.full, in.Value())
}

// sameDecision reports whether two evaluations decided alike.
func sameDecision(a Decision, aerr error, b Decision, berr error) bool {
	if (aerr != nil) != (berr != nil) {
		return false
	}
	if aerr != nil {
		return true
	}
	if a.Allow != b.Allow || !slices.Equal(a.Denials, b.Denials) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for k, v := range a.Headers {
		if b.Headers[k] != v {
			return false
		}
	}
	return true
}

// decisionBytes estimates the heap a cached decision holds: the struct, the
// key and the cache's list and map entries, and its denials and headers.
// BenchmarkCacheBytes measures the real figure.
func decisionBytes(d Decision) int {
	n := 224
	for _, x := range d.Denials {
		n += 32 + len(x.Code) + len(x.Reason)
	}
	for k, v := range d.Headers {
		n += 64 + len(k) + len(v)
	}
	return n
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
