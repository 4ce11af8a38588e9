package server

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/writ-authz/writ/authz"
	"github.com/writ-authz/writ/fleet"
)

// partsEvery is how often the status document's view of writ's parts (the
// store, each component's errors) is refreshed.
const partsEvery = 15 * time.Second

// startFleet starts OPA's plugins writ runs (docs/fleet.md): the status
// document (GET /v1/status; uploaded with status:) and, with
// decision_log.upload:, the shipping of decisions to the collector. It
// stops with the decision log: what the queue holds is handed to OPA's
// decision-log plugin, which flushes within the shutdown's deadline.
func (s *Server) startFleet(ctx context.Context) error {
	f, err := fleet.New(fleet.Options{Upload: s.cfg.DecisionLog.Upload, Status: s.cfg.Status, Labels: s.cfg.Labels,
		ID: s.holder, Version: s.opts.version, Logger: s.log})
	if err != nil {
		return err
	}
	if err := f.Start(ctx); err != nil {
		return err
	}
	s.fleet = f
	s.bus.Subscribe(f)
	s.activations.started("writ", "writ-shadow")
	s.activations.mu.Lock()
	s.activations.report = s.reportPolicies
	s.activations.mu.Unlock()
	s.reportPolicies()
	s.errs.add(componentFleet)
	s.parts = &partsReport{stop: make(chan struct{}), done: make(chan struct{}), last: map[string]string{}}
	s.started(componentFleet, func(ctx context.Context) error {
		close(s.parts.stop)
		if s.parts.running {
			<-s.parts.done
		}
		err := f.Close(ctx)
		if st := f.Stats(); st.Dropped+st.Failed+st.BufferDrops > 0 {
			// Not an audit loss: the local decision log has every line.
			s.log.Warn("decisions not shipped to the collector since the start", "queue_dropped", st.Dropped,
				"failed", st.Failed, "buffer_drops", st.BufferDrops, "chunks_failed", st.ChunksFailed)
		}
		return err
	})
	return nil
}

// activations are when each policy set's revision began serving: at
// start, then at each reload that passed.
type activations struct {
	mu sync.Mutex
	by map[string]time.Time
	// report is called after each reload (Server.reportPolicies).
	report func()
}

func (a *activations) started(names ...string) {
	a.mu.Lock()
	a.by = map[string]time.Time{}
	for _, n := range names {
		a.by[n] = time.Now()
	}
	a.mu.Unlock()
}

// reloaded records a reload of the set name: one that passed moves its
// activation; either way the status is told.
func (a *activations) reloaded(name string, r authz.ReloadResult) {
	a.mu.Lock()
	if r.OK {
		if a.by == nil {
			a.by = map[string]time.Time{}
		}
		a.by[name] = r.At
	}
	report := a.report
	a.mu.Unlock()
	if report != nil {
		report()
	}
}

func (a *activations) at(name string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.by[name]
}

// reportPolicies tells the status document the policy sets serving: the
// live one ("writ") and the shadow ("writ-shadow"), each with its last
// refused reload.
func (s *Server) reportPolicies() {
	if s.fleet == nil {
		return
	}
	set := func(name string, e *authz.Engine, rl *authz.Reloader, source string) fleet.PolicySet {
		ps := fleet.PolicySet{Name: name, Revision: e.Revision(), Activated: s.activations.at(name), Source: source}
		if rl != nil {
			if last := rl.Last(); !last.At.IsZero() && !last.OK {
				ps.Error, ps.ErrorAt = last.Error, last.At
			}
		}
		return ps
	}
	sets := []fleet.PolicySet{set("writ", s.engine, s.reloader, policySource(s.cfg))}
	if s.shadowEngine != nil {
		sets = append(sets, set("writ-shadow", s.shadowEngine, s.shadowReloader, shadowSource(s.cfg)))
	}
	s.fleet.UpdatePolicies(sets)
}

// partsReport is the status document's view of writ's parts, refreshed
// every partsEvery once writ serves (startParts).
type partsReport struct {
	stop, done chan struct{}
	running    bool
	// last is what was reported of each part (state and message).
	last map[string]string
}

// startParts reports writ's parts once every part has started, before
// New returns (the first status names them all), then every partsEvery
// until Shutdown.
func (s *Server) startParts() {
	if s.parts == nil {
		return
	}
	s.reportParts()
	s.parts.running = true
	go func() {
		defer close(s.parts.done)
		t := time.NewTicker(partsEvery)
		defer t.Stop()
		for {
			select {
			case <-s.parts.stop:
				return
			case <-t.C:
				s.reportParts()
			}
		}
	}()
}

// reportParts tells the status document what changed of writ's parts:
// the lifecycle store (it answers or not) and each component (errors since
// the start make it WARN).
func (s *Server) reportParts() {
	now := map[string][2]string{}
	switch ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second); {
	case s.store.ping == nil:
		now["store"] = [2]string{fleet.PartOK, s.store.desc}
		cancel()
	default:
		if err := s.store.ping(ctx); err != nil {
			now["store"] = [2]string{fleet.PartError, "the lifecycle store does not answer: requests that need it are refused"}
		} else {
			now["store"] = [2]string{fleet.PartOK, s.store.desc}
		}
		cancel()
	}
	s.errs.ComponentErrors(func(component string, n uint64) {
		if component == componentStore {
			return
		}
		if n > 0 {
			now[component] = [2]string{fleet.PartWarn, strconv.FormatUint(n, 10) + " error(s) since the start (see writ's log)"}
		} else {
			now[component] = [2]string{fleet.PartOK, ""}
		}
	})
	names := make([]string, 0, len(now))
	for n := range now {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := now[n]
		if s.parts.last[n] == v[0]+"\x00"+v[1] {
			continue
		}
		s.parts.last[n] = v[0] + "\x00" + v[1]
		s.fleet.UpdatePart(n, v[0], v[1])
	}
}
