package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/task"
)

// opCountingStore records the store operations a request makes, and how many
// records they returned (what a durable store decodes).
type opCountingStore struct {
	task.Store
	mu      sync.Mutex
	ops     []string
	records int
}

func (s *opCountingStore) note(op string, rec bool) {
	s.mu.Lock()
	s.ops = append(s.ops, op)
	if rec {
		s.records++
	}
	s.mu.Unlock()
}

// take returns what was recorded since the last take.
func (s *opCountingStore) take() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops, n := s.ops, s.records
	s.ops, s.records = nil, 0
	return ops, n
}

func (s *opCountingStore) Get(ctx context.Context, ref task.Ref) (task.Record, bool, error) {
	r, ok, err := s.Store.Get(ctx, ref)
	s.note("Get", ok)
	return r, ok, err
}

func (s *opCountingStore) Context(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	s.note("Context", false)
	return s.Store.Context(ctx, ref)
}

func (s *opCountingStore) Tombstone(ctx context.Context, ref task.Ref) (task.Owner, bool, error) {
	s.note("Tombstone", false)
	return s.Store.Tombstone(ctx, ref)
}

// TestSecurityProbeSameWork — Threat: task ids are a timing oracle: the
// first probe of another caller's task id was answered about 100 µs slower
// than an unknown id's, because the policy denied the foreign task (the
// NOT_TASK_OWNER path, reasons and all) while it allowed the unknown one,
// which writ then answered not found. Defence: a task the caller may not see
// is decided as a foreign one is, with an owner that is nobody, so both take
// the policy's same path: the same store operations, the same decision
// (denial codes, a cache miss on the first probe and a hit on the next) and
// the same answer but for the id. (The foreign Get returns a record, which a
// durable store decodes: about a microsecond, measured in
// BenchmarkProbeForeign against BenchmarkProbeUnknown.)
func TestSecurityProbeSameWork(t *testing.T) {
	up := rememberingAgent(t)
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent(up.Srv.URL)}, nil)
	cs := &opCountingStore{Store: h.Store}
	h.Core.SetStore(cs)
	inv := h.Token(proxytest.Investigator)
	for range 3 {
		if _, a := h.RPC("/", inv, "1.0", "SendMessage", proxytest.SendParams); a.Error != nil {
			t.Fatal(string(a.Raw))
		}
	}
	rec := &recordingSink{}
	h.Bus.Subscribe(rec)
	retail := h.Token(proxytest.RetailBot)
	type work struct {
		ops     []string
		records int
		allow   bool
		hit     bool
		codes   []string
		answer  string
	}
	probe := func(id string) work {
		cs.take()
		_, a := h.RPC("/", retail, "1.0", "GetTask", map[string]any{"id": id})
		ops, n := cs.take()
		rec.mu.Lock()
		d := rec.decisions[len(rec.decisions)-1]
		rec.mu.Unlock()
		var codes []string
		for _, den := range d.Denials {
			codes = append(codes, den.Code)
		}
		return work{ops: ops, records: n, allow: d.Allow, hit: d.CacheHit, codes: codes,
			answer: strings.ReplaceAll(string(a.Raw), id, "ID")}
	}
	for i := 1; i <= 3; i++ {
		foreign, unknown := fmt.Sprintf("t-%d", i), fmt.Sprintf("t-%d", 100+i)
		for _, round := range []string{"first", "repeat"} {
			f, u := probe(foreign), probe(unknown)
			if !slices.Equal(f.ops, u.ops) {
				t.Errorf("%s probe %d: store operations foreign %v, unknown %v", round, i, f.ops, u.ops)
			}
			if f.allow != u.allow || f.hit != u.hit || !slices.Equal(f.codes, u.codes) {
				t.Errorf("%s probe %d: decisions foreign allow=%v hit=%v %v, unknown allow=%v hit=%v %v",
					round, i, f.allow, f.hit, f.codes, u.allow, u.hit, u.codes)
			}
			if f.hit != (round == "repeat") {
				t.Errorf("%s probe %d: cache hit %v", round, i, f.hit)
			}
			if f.answer != u.answer || !strings.Contains(f.answer, "-32001") {
				t.Errorf("%s probe %d: answers foreign %s, unknown %s", round, i, f.answer, u.answer)
			}
			if f.records != 1 || u.records != 0 {
				t.Errorf("%s probe %d: records read foreign %d, unknown %d", round, i, f.records, u.records)
			}
		}
	}
}
