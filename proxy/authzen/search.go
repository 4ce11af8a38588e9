package authzen

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The Search APIs (§8): the decision point lists its candidates for the
// searched entity, and each candidate is one evaluation, the search's other
// entities and context unchanged; the permitted ones are the results. So a
// result, asked as an evaluation, is permitted (§8.1's SHOULD) by
// construction, and it is decided (and cached) exactly as that evaluation.

// pageResponse is a search response's page object (§8.2.2).
type pageResponse struct {
	NextToken string `json:"next_token"`
	Count     int    `json:"count"`
	Total     int    `json:"total"`
}

// searchResponse is a Search API response; the page comes first, as §8.3
// recommends.
type searchResponse struct {
	Page    *pageResponse    `json:"page,omitempty"`
	Results []map[string]any `json:"results"`
}

// errTooManyCandidates: a search with more candidates than
// authzen.max_search_candidates fails rather than answer a truncated list.
type errTooManyCandidates struct{ n, limit int }

func (e errTooManyCandidates) Error() string {
	return fmt.Sprintf("the search has %d candidates; at most %d are evaluated (authzen.max_search_candidates)", e.n, e.limit)
}

// run answers the search: every permitted candidate, paged.
func (s *Server) run(ctx context.Context, ev evaluator, sr *search) (*searchResponse, error) {
	offset, limit, err := s.pageOf(sr)
	if err != nil {
		return nil, err
	}
	cands, err := ev.candidates(ctx, sr.kind, &sr.q)
	if err != nil {
		return nil, err
	}
	if len(cands) > s.cfg.MaxSearchCandidates {
		return nil, errTooManyCandidates{len(cands), s.cfg.MaxSearchCandidates}
	}
	var results []map[string]any
	seen := map[string]bool{}
	for _, c := range cands {
		key, ok := sr.matches(c)
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		q := sr.q
		switch sr.kind {
		case searchSubject:
			q.Subject = c
		case searchResource:
			q.Resource = c
		case searchAction:
			q.Action = c
		}
		s.stats.Evaluations.Add(1)
		if r := ev.evaluate(ctx, &q); r.Decision && r.failed == nil {
			results = append(results, c)
		}
	}
	total := len(results)
	out := &searchResponse{Results: []map[string]any{}}
	if offset < total {
		out.Results = results[offset:min(total, offset+limit)]
	}
	if sr.page.given || total > limit {
		next := ""
		if end := offset + len(out.Results); end < total {
			next = s.token(sr, end, limit)
		}
		out.Page = &pageResponse{NextToken: next, Count: len(out.Results), Total: total}
	}
	return out, nil
}

// matches reports whether a candidate is an entity of the searched type (a
// subject or resource with a non-empty id, an action with a name), and its
// key among the results.
func (sr *search) matches(c map[string]any) (string, bool) {
	if sr.kind == searchAction {
		name := str(c, "name")
		return "\x00" + name, name != ""
	}
	want := str(sr.q.Subject, "type")
	if sr.kind == searchResource {
		want = str(sr.q.Resource, "type")
	}
	id := str(c, "id")
	return want + "\x00" + id, id != "" && str(c, "type") == want
}

// pageState is what a page token carries: where the next page starts, the
// page size, and the digest of the search it belongs to.
type pageState struct {
	Offset int    `json:"o"`
	Limit  int    `json:"l"`
	Digest string `json:"d"`
}

// pageOf is where the page starts and how long it is: from the token (which
// must belong to this very search, §8.2: a request that changed mid-way is
// refused) or the first page, at most authzen.page_size long.
func (s *Server) pageOf(sr *search) (offset, limit int, err error) {
	limit = s.cfg.PageSize
	if sr.page.limit > 0 {
		limit = min(sr.page.limit, s.cfg.PageSize)
	}
	if sr.page.token == "" {
		return 0, limit, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(sr.page.token)
	var st pageState
	if err != nil || json.Unmarshal(raw, &st) != nil || st.Offset < 0 || st.Limit < 1 || st.Digest != digest(sr) {
		return 0, 0, bad("page.token does not belong to this search (the entities, context and page properties must not change between pages)")
	}
	if sr.page.limit == 0 {
		limit = min(st.Limit, s.cfg.PageSize)
	}
	return st.Offset, limit, nil
}

// token is the opaque next_token of the page after end.
func (s *Server) token(sr *search, end, limit int) string {
	raw, _ := json.Marshal(pageState{Offset: end, Limit: limit, Digest: digest(sr)})
	return base64.RawURLEncoding.EncodeToString(raw)
}

// digest identifies a search across its pages: its kind, entities, context
// and page properties (not the token, nor the limit, which a next page may
// leave out).
func digest(sr *search) string {
	var props any
	if page, ok := sr.raw["page"].(map[string]any); ok {
		props = page["properties"]
	}
	raw, _ := json.Marshal([]any{sr.kind, sr.q.Subject, sr.q.Action, sr.q.Resource, sr.q.Context, props})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:12])
}
