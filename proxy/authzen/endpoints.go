package authzen

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// pdp is one decision point the listener serves: the delegation profile at
// the root, or an application under /<name>.
type pdp interface {
	// begin prepares what the evaluations of one request share: one policy
	// revision, one compiled query.
	begin() (evaluator, error)
	// searches reports whether the decision point answers searches of kind.
	searches(kind searchKind) bool
}

// evaluator decides the evaluations of one request.
type evaluator interface {
	// evaluate decides one evaluation. A result is always usable: what
	// cannot be decided is denied (decision false), and failed says why
	// when the evaluation itself failed rather than denied.
	evaluate(ctx context.Context, q *query) result
	// candidates are what a search of kind may answer (each then evaluated
	// in turn): entities of the searched type, actions by name.
	candidates(ctx context.Context, kind searchKind, q *query) ([]map[string]any, error)
}

// result is one Decision (§5.5): the decision and its context.
type result struct {
	Decision bool           `json:"decision"`
	Context  map[string]any `json:"context,omitempty"`
	// failed: the evaluation failed (the policy errored, the store is down):
	// a lone evaluation answers 500; in a batch the item is denied with the
	// error in its context (§7.2.1).
	failed error
	// invalid: the evaluation is well-formed AuthZEN that its decision point
	// cannot ask (an unknown operation, a resource type it does not know):
	// denied with the error in its context, logged and counted.
	invalid error
}

// denied is a result that denies for a reason of the request's own (§7.2.1:
// an error specific to one evaluation is a decision false with the error in
// its context).
func denied(status int, msg string) result {
	return result{Context: map[string]any{"error": map[string]any{"status": status, "message": msg}}}
}

// failure is a result for an evaluation that could not be made.
func failure(status int, msg string, err error) result {
	r := denied(status, msg)
	r.failed = err
	return r
}

// evaluation answers POST /access/v1/evaluation (§6).
func (s *Server) evaluation(x *exchange, p pdp, m map[string]any) {
	q, err := evaluationOf(m)
	if err != nil {
		s.fail(x, http.StatusBadRequest, err.Error(), nil)
		return
	}
	ev, err := p.begin()
	if err != nil {
		s.fail(x, http.StatusInternalServerError, "the decision point is not available", err)
		return
	}
	s.reply1(x, ev.evaluate(x.r.Context(), q))
}

// reply1 answers a lone evaluation: its decision, or 500 when it failed.
func (s *Server) reply1(x *exchange, r result) {
	s.stats.Evaluations.Add(1)
	s.noteInvalid(x, -1, r)
	if r.failed != nil {
		s.fail(x, http.StatusInternalServerError, "the evaluation failed", r.failed)
		return
	}
	s.reply(x, r)
}

// noteInvalid logs and counts an evaluation its decision point could not
// ask (index -1: the request's only one).
func (s *Server) noteInvalid(x *exchange, i int, r result) {
	if r.invalid == nil {
		return
	}
	s.stats.InvalidItems.Add(1)
	s.log.Info("authzen: an evaluation is invalid; it is denied", "index", i, "error", r.invalid.Error(),
		"path", x.r.URL.Path, "request_id", x.r.Header.Get(requestIDHeader), "client", x.client)
}

// evaluations answers POST /access/v1/evaluations (§7): every item decided
// in order under one prepared evaluator, stopping where the semantic says.
func (s *Server) evaluations(x *exchange, p pdp, m map[string]any) {
	b, err := batchOf(m, s.cfg.MaxEvaluations)
	if err != nil {
		s.fail(x, http.StatusBadRequest, err.Error(), nil)
		return
	}
	ev, err := p.begin()
	if err != nil {
		s.fail(x, http.StatusInternalServerError, "the decision point is not available", err)
		return
	}
	ctx := x.r.Context()
	if len(b.items) == 0 {
		// Without evaluations the request is one evaluation (§7.1), and so
		// is its answer.
		s.reply1(x, ev.evaluate(ctx, &b.defaults))
		return
	}
	out := make([]result, 0, len(b.items))
	for i := range b.items {
		var r result
		if q, err := b.item(i); err != nil {
			r = denied(http.StatusBadRequest, err.Error())
			r.invalid = err
		} else {
			s.stats.Evaluations.Add(1)
			r = ev.evaluate(ctx, q)
			if r.failed != nil {
				s.log.Error("authzen: an evaluation of a batch failed; it is denied", "index", i, "error", r.failed.Error(),
					"request_id", x.r.Header.Get(requestIDHeader))
			}
		}
		s.noteInvalid(x, i, r)
		out = append(out, r)
		if (b.semantic == denyOnFirstDeny && !r.Decision) || (b.semantic == permitOnFirstPermit && r.Decision) {
			break
		}
	}
	s.reply(x, struct {
		Evaluations []result `json:"evaluations"`
	}{out})
}

// search answers POST /access/v1/search/{subject,resource,action} (§8).
func (s *Server) search(x *exchange, p pdp, kind searchKind, m map[string]any) {
	if !p.searches(kind) {
		s.fail(x, http.StatusNotFound, "this decision point offers no "+string(kind)+" search", nil)
		return
	}
	sr, err := searchOf(kind, m)
	if err != nil {
		s.fail(x, http.StatusBadRequest, err.Error(), nil)
		return
	}
	ev, err := p.begin()
	if err != nil {
		s.fail(x, http.StatusInternalServerError, "the decision point is not available", err)
		return
	}
	out, err := s.run(x.r.Context(), ev, sr)
	var br *badRequest
	switch {
	case errors.As(err, &br):
		s.fail(x, http.StatusBadRequest, br.msg, nil)
	case err != nil:
		s.fail(x, http.StatusInternalServerError, "the search failed", err)
	default:
		s.reply(x, out)
	}
}

// metadata answers GET /.well-known/authzen-configuration[/<name>] (§9):
// the identifier of the decision point and the endpoints it offers, an
// endpoint it does not offer omitted. It needs no authentication: it is
// how an enforcement point finds the decision point.
func (s *Server) metadata(x *exchange, rest string) {
	app := strings.TrimPrefix(rest, "/")
	p := s.pdpOf(app)
	if p == nil || strings.Contains(app, "/") || (rest != "" && (app == "" || rest[0] != '/')) {
		s.fail(x, http.StatusNotFound, "no such decision point", nil)
		return
	}
	if x.r.Method != http.MethodGet && x.r.Method != http.MethodHead {
		x.w.Header().Set("Allow", "GET, HEAD")
		s.fail(x, http.StatusMethodNotAllowed, "the metadata document takes GET", nil)
		return
	}
	base := s.publicURL(x.r)
	if app != "" {
		base += "/" + app
	}
	doc := map[string]string{
		"policy_decision_point":       base,
		"access_evaluation_endpoint":  base + pathEvaluation,
		"access_evaluations_endpoint": base + pathEvaluations,
	}
	for _, k := range searchKinds {
		if p.searches(k) {
			doc["search_"+string(k)+"_endpoint"] = base + pathSearch + string(k)
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		s.fail(x, http.StatusInternalServerError, "the metadata could not be rendered", err)
		return
	}
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	x.w.WriteHeader(http.StatusOK)
	if x.r.Method == http.MethodGet {
		_, _ = x.w.Write(raw)
	}
	s.served(x, http.StatusOK)
}
