package authzen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The AuthZEN information model as the door reads it: entities stay the
// JSON objects the enforcement point sent (their properties, and any other
// member, kept: an application's package decides on all of it), checked for
// what the specification requires of them (Authorization API 1.0 §5: a
// subject and a resource have string type and id, an action a string name,
// properties and the context are objects). A request that breaks a
// requirement is a bad request (§10.1.2, 400); members the door does not
// know are ignored (forward compatibility).

// query is one access evaluation: subject, action, resource and context
// (nil when the request has none).
type query struct {
	Subject, Action, Resource, Context map[string]any
}

// input is the evaluation (or search) as an application's package
// receives it: the entities and context as sent, those absent left out.
func (q *query) input() map[string]any {
	in := make(map[string]any, 4)
	for k, v := range map[string]map[string]any{"subject": q.Subject, "action": q.Action, "resource": q.Resource,
		"context": q.Context} {
		if v != nil {
			in[k] = v
		}
	}
	return in
}

// badRequest is a request the specification answers with 400 Bad Request.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func bad(format string, args ...any) error { return &badRequest{msg: fmt.Sprintf(format, args...)} }

// decode reads a whole request body (already checked by wire.CheckJSON):
// one JSON object, numbers kept as written (json.Number), decoded once.
func decode(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, bad("the request body must be a JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, bad("the request body must be a JSON object")
	}
	return m, nil
}

// object reads the member name of m as an object: nil when absent or null
// (the specification asks senders to omit a null property, so null is read
// as absent).
func object(m map[string]any, name, what string) (map[string]any, error) {
	v, ok := m[name]
	if !ok || v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, bad("%s must be an object", what)
	}
	return obj, nil
}

// entity reads the entity name of m: nil when absent; an error when it is
// not an object whose required members are non-empty strings, or whose
// properties are not an object.
func entity(m map[string]any, name, what string, required ...string) (map[string]any, error) {
	obj, err := object(m, name, what)
	if err != nil || obj == nil {
		return nil, err
	}
	for _, k := range required {
		v, ok := obj[k]
		if !ok || v == nil {
			return nil, bad("%s.%s is required", what, k)
		}
		s, ok := v.(string)
		if !ok {
			return nil, bad("%s.%s must be a string", what, k)
		}
		if s == "" {
			return nil, bad("%s.%s must not be empty", what, k)
		}
	}
	if p, ok := obj["properties"]; ok && p != nil {
		if _, ok := p.(map[string]any); !ok {
			return nil, bad("%s.properties must be an object", what)
		}
	}
	return obj, nil
}

// str is a string member of an entity ("" when absent or not a string).
func str(obj map[string]any, k string) string {
	s, _ := obj[k].(string)
	return s
}

// properties is an entity's properties (nil when it has none).
func properties(obj map[string]any) map[string]any {
	p, _ := obj["properties"].(map[string]any)
	return p
}

// The entities' required members, by position.
var (
	subjectKeys  = []string{"type", "id"}
	actionKeys   = []string{"name"}
	resourceKeys = []string{"type", "id"}
)

// parts reads the four members of an evaluation, each optional here.
func parts(m map[string]any, where string) (query, error) {
	var q query
	var err error
	if q.Subject, err = entity(m, "subject", where+"subject", subjectKeys...); err != nil {
		return q, err
	}
	if q.Action, err = entity(m, "action", where+"action", actionKeys...); err != nil {
		return q, err
	}
	if q.Resource, err = entity(m, "resource", where+"resource", resourceKeys...); err != nil {
		return q, err
	}
	if q.Context, err = object(m, "context", where+"context"); err != nil {
		return q, err
	}
	return q, nil
}

// complete refuses an evaluation that lacks a required entity.
func (q *query) complete(where, hint string) error {
	for _, e := range []struct {
		name string
		v    map[string]any
	}{{"subject", q.Subject}, {"action", q.Action}, {"resource", q.Resource}} {
		if e.v == nil {
			return bad("%s%s is required%s", where, e.name, hint)
		}
	}
	return nil
}

// evaluationOf reads an Access Evaluation request (§6.1).
func evaluationOf(m map[string]any) (*query, error) {
	q, err := parts(m, "")
	if err != nil {
		return nil, err
	}
	if err := q.complete("", ""); err != nil {
		return nil, err
	}
	return &q, nil
}

// The evaluations semantics (§7.1.2).
const (
	executeAll          = "execute_all"
	denyOnFirstDeny     = "deny_on_first_deny"
	permitOnFirstPermit = "permit_on_first_permit"
)

// batch is an Access Evaluations request (§7.1): the defaults, the items as
// sent (each read on its own, so one bad item fails alone), the semantic.
type batch struct {
	defaults query
	items    []any
	semantic string
}

// batchOf reads an Access Evaluations request. The top level's entities,
// when present, must be valid (every item inheriting one would be invalid);
// an item is read when it is evaluated.
func batchOf(m map[string]any, limit int) (*batch, error) {
	b := &batch{semantic: executeAll}
	var err error
	if b.defaults, err = parts(m, ""); err != nil {
		return nil, err
	}
	if v, ok := m["evaluations"]; ok && v != nil {
		if b.items, ok = v.([]any); !ok {
			return nil, bad("evaluations must be an array")
		}
		if len(b.items) > limit {
			return nil, bad("%d evaluations in one request; at most %d are accepted (authzen.max_evaluations)", len(b.items), limit)
		}
	}
	opts, err := object(m, "options", "options")
	if err != nil {
		return nil, err
	}
	if s, ok := opts["evaluations_semantic"]; ok && s != nil {
		name, _ := s.(string)
		switch name {
		case executeAll, denyOnFirstDeny, permitOnFirstPermit:
			b.semantic = name
		default:
			return nil, bad("options.evaluations_semantic must be %s, %s or %s", executeAll, denyOnFirstDeny, permitOnFirstPermit)
		}
	}
	if len(b.items) == 0 {
		// No evaluations: the request is a single evaluation (§7.1).
		if err := b.defaults.complete("", ""); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// item is the i-th evaluation with the defaults applied: an entity the item
// names replaces the default whole (§7.1.1).
func (b *batch) item(i int) (*query, error) {
	where := fmt.Sprintf("evaluations[%d].", i)
	m, ok := b.items[i].(map[string]any)
	if !ok {
		return nil, bad("%s must be an object", strings.TrimSuffix(where, "."))
	}
	own, err := parts(m, where)
	if err != nil {
		return nil, err
	}
	q := b.defaults
	if own.Subject != nil {
		q.Subject = own.Subject
	}
	if own.Action != nil {
		q.Action = own.Action
	}
	if own.Resource != nil {
		q.Resource = own.Resource
	}
	if own.Context != nil {
		q.Context = own.Context
	}
	if err := q.complete(where, " (in the evaluation or at the top level)"); err != nil {
		return nil, err
	}
	return &q, nil
}

// searchKind is what a search looks for (§8).
type searchKind string

// The search kinds, as their endpoints name them.
const (
	searchSubject  searchKind = "subject"
	searchResource searchKind = "resource"
	searchAction   searchKind = "action"
)

var searchKinds = []searchKind{searchSubject, searchResource, searchAction}

// search is a Search API request.
type search struct {
	kind searchKind
	q    query
	page pageRequest
	// raw are the request's members, for the page token's digest.
	raw map[string]any
}

// pageRequest is a search request's page object (§8.2.1).
type pageRequest struct {
	given bool
	token string
	// limit is the page size asked for, 0 when none was.
	limit int
}

// searchOf reads a search of kind (§8.4-8.6): the searched entity needs
// only its type (or, for actions, is not sent at all); every other entity
// is an input and must be whole.
func searchOf(kind searchKind, m map[string]any) (*search, error) {
	s := &search{kind: kind, raw: m}
	var err error
	subjectKeys, resourceKeys := subjectKeys, resourceKeys
	switch kind {
	case searchSubject:
		subjectKeys = []string{"type"}
	case searchResource:
		resourceKeys = []string{"type"}
	}
	if s.q.Subject, err = entity(m, "subject", "subject", subjectKeys...); err != nil {
		return nil, err
	}
	if s.q.Resource, err = entity(m, "resource", "resource", resourceKeys...); err != nil {
		return nil, err
	}
	if kind != searchAction {
		// An action search has no action; one sent is ignored.
		if s.q.Action, err = entity(m, "action", "action", actionKeys...); err != nil {
			return nil, err
		}
	}
	if s.q.Context, err = object(m, "context", "context"); err != nil {
		return nil, err
	}
	switch {
	case s.q.Subject == nil:
		return nil, bad("subject is required")
	case s.q.Resource == nil:
		return nil, bad("resource is required")
	case kind != searchAction && s.q.Action == nil:
		return nil, bad("action is required")
	}
	if kind == searchAction {
		s.q.Action = nil
	}
	if s.page, err = pageOf(m); err != nil {
		return nil, err
	}
	return s, nil
}

// pageOf reads the page object.
func pageOf(m map[string]any) (pageRequest, error) {
	var p pageRequest
	obj, err := object(m, "page", "page")
	if err != nil || obj == nil {
		return p, err
	}
	p.given = true
	if t, ok := obj["token"]; ok && t != nil {
		s, ok := t.(string)
		if !ok {
			return p, bad("page.token must be a string")
		}
		p.token = s
	}
	if l, ok := obj["limit"]; ok && l != nil {
		n, ok := l.(json.Number)
		v, err := n.Int64()
		if !ok || err != nil || v < 0 {
			return p, bad("page.limit must be a non-negative integer")
		}
		p.limit = int(min(v, 1<<30))
	}
	if pp, ok := obj["properties"]; ok && pp != nil {
		if _, ok := pp.(map[string]any); !ok {
			return p, bad("page.properties must be an object")
		}
	}
	return p, nil
}
