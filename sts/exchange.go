package sts

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/task"
)

// actor is who authenticated a token request: the agent that acts.
type actor struct {
	id     string
	issuer string    // the issuer of its credential (the STS's own for HTTP Basic)
	exp    time.Time // its credential's expiry; zero for HTTP Basic
}

// outcome is what the log says of a request, issued or refused.
type outcome struct {
	grant, actor, subject, audience, scope, txn, jti string
	depth                                            int
	exp                                              time.Time
}

func (o outcome) attrs() []any {
	a := []any{"grant_type", o.grant}
	for _, kv := range [][2]string{{"actor", o.actor}, {"sub", o.subject}, {"aud", o.audience},
		{"scope", o.scope}, {"txn", o.txn}, {"jti", o.jti}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	if o.depth > 0 {
		a = append(a, "chain_depth", o.depth)
	}
	if !o.exp.IsZero() {
		a = append(a, "exp", o.exp.UTC().Format(time.RFC3339))
	}
	return a
}

// grant answers a token request of any grant type.
func (s *Server) grant(st *state, req tokenRequest) (*tokenResponse, outcome, *Error) {
	out := outcome{grant: req.GrantType}
	switch req.GrantType {
	case GrantTokenExchange:
		return s.exchange(st, req)
	case GrantClientCredentials:
		return s.clientCredentials(st, req)
	case "":
		return nil, out, refuse(CodeInvalidRequest, "grant_type is required")
	}
	return nil, out, refuse(CodeUnsupportedGrantType, "grant_type %q is not supported (token exchange and client_credentials are)", clip(req.GrantType))
}

// issuedClaims are the claims of every token the STS signs (EGRESS.md, "The
// exchanged token"); a client-credentials token has no scope, tenant,
// classification, txn or act.
type issuedClaims struct {
	Iss            string         `json:"iss"`
	Sub            string         `json:"sub"`
	Aud            string         `json:"aud"`
	ClientID       string         `json:"client_id"`
	Scope          string         `json:"scope,omitempty"`
	Tenant         string         `json:"tenant,omitempty"`
	Classification string         `json:"classification,omitempty"`
	Iat            int64          `json:"iat"`
	Nbf            int64          `json:"nbf"`
	Exp            int64          `json:"exp"`
	Jti            string         `json:"jti"`
	Txn            string         `json:"txn,omitempty"`
	Act            map[string]any `json:"act,omitempty"`
}

// exchange is the RFC 8693 token exchange. The checks run cheapest first, and
// every one that fails refuses the whole exchange: nothing is issued with
// less than was asked, so a client never mistakes a narrowed token for the
// one it wanted.
func (s *Server) exchange(st *state, req tokenRequest) (*tokenResponse, outcome, *Error) {
	out := outcome{grant: req.GrantType, audience: req.Target}
	if e := checkExchangeParams(req); e != nil {
		return nil, out, e
	}
	act, e := s.authenticate(st, req)
	if e != nil {
		return nil, out, e
	}
	out.actor = act.id
	if !st.audiences[req.Target] {
		return nil, out, refuse(CodeInvalidTarget, "%q is not a target of this STS", clip(req.Target))
	}
	subj, err := st.subjects.VerifyToken(req.SubjectToken)
	if err != nil {
		return nil, out, tokenRefusal(CodeInvalidGrant, "subject token", err, s.cfg.MaxChainDepth)
	}
	sub, _ := subj.Claims["sub"].(string)
	if sub == "" {
		return nil, out, refuse(CodeInvalidGrant, "subject token has no sub: an exchanged token keeps its subject")
	}
	out.subject = sub
	if e := s.checkHolder(subj, act); e != nil {
		return nil, out, e
	}
	if e := s.checkMayAct(st, subj, act); e != nil {
		return nil, out, e
	}
	hops := chainOf(subj, act.id)
	out.depth = len(hops) + 1
	if e := s.checkChain(hops, sub, act); e != nil {
		return nil, out, e
	}
	scope, e := narrowScope(req, subj.Scopes)
	if e != nil {
		return nil, out, e
	}
	out.scope = strings.Join(scope, " ")
	class, e := narrowClassification(req, subj.Classification)
	if e != nil {
		return nil, out, e
	}
	if req.TenantGiven && req.Tenant != subj.Tenant {
		return nil, out, refuse(CodeInvalidGrant, "an exchange never changes tenant: the subject token's is %q, %q was asked", clip(subj.Tenant), clip(req.Tenant))
	}
	now := s.now()
	exp, e := s.lifetime(req, now, subj.Expires, act.exp)
	if e != nil {
		return nil, out, e
	}
	out.exp = exp
	txn, e := chainID(subj.Claims["txn"])
	if e != nil {
		return nil, out, e
	}
	out.txn = txn
	claims := issuedClaims{Iss: st.issuer, Sub: sub, Aud: req.Target, ClientID: act.id, Scope: out.scope,
		Tenant: subj.Tenant, Classification: class, Iat: now.Unix(), Nbf: now.Unix(), Exp: exp.Unix(),
		Jti: randomID(), Txn: txn, Act: nextAct(act.id, subj, hops)}
	out.jti = claims.Jti
	tok, err := s.key.sign(claims)
	if err != nil {
		return nil, out, refuse(CodeServerError, "the token could not be signed").withDetail(err)
	}
	issued := req.RequestedTokenType
	if issued == "" {
		issued = TokenTypeAccessToken
	}
	return &tokenResponse{AccessToken: tok, IssuedTokenType: issued, TokenType: "Bearer",
		ExpiresIn: claims.Exp - claims.Iat, Scope: out.scope}, out, nil
}

// checkExchangeParams checks what a token exchange request must name, before
// anything is verified.
func checkExchangeParams(req tokenRequest) *Error {
	switch {
	case req.SubjectToken == "":
		return refuse(CodeInvalidRequest, "subject_token is required")
	case !tokenTypeOK(req.SubjectTokenType):
		return refuse(CodeInvalidRequest, "subject_token_type must be %s or %s", TokenTypeJWT, TokenTypeAccessToken)
	case req.ActorToken == "" && req.ActorTokenType != "":
		return refuse(CodeInvalidRequest, "actor_token_type is given without an actor_token")
	case req.RequestedTokenType != "" && !tokenTypeOK(req.RequestedTokenType):
		return refuse(CodeInvalidRequest, "requested_token_type %q is not supported (%s, %s)", clip(req.RequestedTokenType), TokenTypeAccessToken, TokenTypeJWT)
	case req.Target == "":
		return refuse(CodeInvalidTarget, "an audience (or resource) is required: a token is issued for one target")
	}
	return nil
}

func tokenTypeOK(t string) bool { return t == TokenTypeJWT || t == TokenTypeAccessToken }

// authenticate finds the actor: an actor token the STS verifies, HTTP Basic
// against client_secrets_file, or both (which must name the same actor).
func (s *Server) authenticate(st *state, req tokenRequest) (actor, *Error) {
	var a actor
	if req.Basic {
		if s.clients == nil || !s.clients.check(req.ClientID, req.ClientKey) {
			e := refuse(CodeInvalidClient, "client authentication failed")
			e.basic = true
			return a, e
		}
		a = actor{id: req.ClientID, issuer: st.issuer}
	}
	if req.ActorToken != "" {
		if !tokenTypeOK(req.ActorTokenType) {
			return a, refuse(CodeInvalidRequest, "actor_token_type must be %s or %s", TokenTypeJWT, TokenTypeAccessToken)
		}
		c, err := st.actors.VerifyToken(req.ActorToken)
		if err != nil {
			return a, tokenRefusal(CodeInvalidClient, "actor token", err, 1)
		}
		if _, delegated := c.Claims["act"]; delegated {
			return a, refuse(CodeInvalidClient, "the actor token is itself delegated (it has an act claim): an actor authenticates as itself")
		}
		if req.Basic && c.AgentID != a.id {
			return a, refuse(CodeInvalidClient, "the actor token names %q but the client authenticated as %q", clip(c.AgentID), clip(a.id))
		}
		a = actor{id: c.AgentID, issuer: c.Issuer, exp: c.Expires}
	}
	if a.id == "" {
		return a, refuse(CodeInvalidClient, "no actor credential: send an actor_token, or authenticate with HTTP Basic")
	}
	return a, nil
}

// tokenRefusal turns a failed verification of the subject or actor token into
// its refusal: the description says which check failed, the log gets the
// verifier's own words.
func tokenRefusal(code, what string, err error, maxDepth int) *Error {
	var why string
	switch {
	case errors.Is(err, identity.ErrKeysUnavailable):
		return refuse(CodeTemporarilyUnavailable, "the %s issuer's keys cannot be fetched now", what).withDetail(err)
	case errors.Is(err, identity.ErrUnknownIssuer):
		why = "its issuer is not trusted by this STS"
	case errors.Is(err, identity.ErrBadSignature):
		why = "its signature does not verify"
	case errors.Is(err, identity.ErrUnknownKey):
		why = "it is signed with a key its issuer does not publish"
	case errors.Is(err, identity.ErrAudienceRejected):
		why = "its audience is not one this STS accepts"
	case errors.Is(err, identity.ErrTokenExpired):
		why = "it has expired"
	case errors.Is(err, identity.ErrTokenNotYetValid):
		why = "it is not valid yet"
	case errors.Is(err, identity.ErrChainTooDeep):
		why = fmt.Sprintf("its act chain is deeper than %d", maxDepth)
	case errors.Is(err, identity.ErrClaimType):
		why = "a claim has the wrong type or value"
	default:
		why = "it is not a well-formed JWT"
	}
	return refuse(code, "%s refused: %s", what, why).withDetail(err)
}

// checkHolder binds the subject token to the actor (subject_audience): its
// aud must name the actor, so that only the agent a token was issued to can
// exchange it.
func (s *Server) checkHolder(subj identity.Caller, a actor) *Error {
	if s.cfg.SubjectAudience == "" {
		return nil
	}
	want := strings.ReplaceAll(s.cfg.SubjectAudience, "{actor}", a.id)
	if !slices.Contains(audiences(subj.Claims["aud"]), want) {
		return refuse(CodeInvalidGrant, "the subject token was not issued to actor %q (its aud does not contain %q)", clip(a.id), clip(want))
	}
	return nil
}

// audiences reads an aud claim identity has already checked: a string or a
// list of strings.
func audiences(v any) []string {
	switch a := v.(type) {
	case string:
		return []string{a}
	case []any:
		out := make([]string, 0, len(a))
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// checkMayAct applies RFC 8693 §4.4: a subject token's may_act names who may
// act for it ({"sub": "A"} or {"sub": ["A", "B"]}, with an optional iss that
// must be the actor credential's issuer). With may_act: require, a subject
// token from another issuer must carry one; the STS's own tokens continue a
// delegation it already authorized.
func (s *Server) checkMayAct(st *state, subj identity.Caller, a actor) *Error {
	v, present := subj.Claims["may_act"]
	if !present || v == nil {
		if s.cfg.MayAct == config.STSMayActRequire && subj.Issuer != st.issuer {
			return refuse(CodeUnauthorizedClient, "the subject token has no may_act claim, and this STS requires one to start a delegation")
		}
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return refuse(CodeInvalidGrant, "the subject token's may_act is not an object")
	}
	var names []string
	switch sub := obj["sub"].(type) {
	case string:
		names = []string{sub}
	case []any:
		for _, x := range sub {
			n, ok := x.(string)
			if !ok {
				return refuse(CodeInvalidGrant, "the subject token's may_act.sub is not a string or a list of strings")
			}
			names = append(names, n)
		}
	default:
		return refuse(CodeInvalidGrant, "the subject token's may_act.sub is not a string or a list of strings")
	}
	if iss, has := obj["iss"]; has {
		if s, ok := iss.(string); !ok || s != a.issuer {
			return refuse(CodeUnauthorizedClient, "the subject token's may_act names another issuer than the actor's")
		}
	}
	if !slices.Contains(names, a.id) {
		return refuse(CodeUnauthorizedClient, "the subject token's may_act does not name actor %q", clip(a.id))
	}
	return nil
}

// chainOf is the subject token's actors, oldest first: none for a token
// without act, else its earlier hops and its current actor.
func chainOf(subj identity.Caller, actor string) []string {
	if _, ok := subj.Claims["act"]; ok {
		return append(slices.Clone(subj.Chain), subj.AgentID)
	}
	// Without act, the agent a token was issued to is its azp or client_id
	// (writ's identity reads it so: the caller the actor's own writ saw). It
	// is the chain's first hop — unless it is the actor itself, exchanging a
	// token issued to it (the root of a chain), or the subject.
	if sub, _ := subj.Claims["sub"].(string); subj.AgentID != "" && subj.AgentID != sub && subj.AgentID != actor {
		return []string{subj.AgentID}
	}
	return nil
}

// checkChain refuses a cycle (the actor already in the chain, or the chain's
// subject itself) and a chain over max_chain_depth.
func (s *Server) checkChain(hops []string, sub string, a actor) *Error {
	if slices.Contains(hops, a.id) {
		return refuse(CodeInvalidGrant, "actor %q is already in the delegation chain (a cycle)", clip(a.id))
	}
	if a.id == sub {
		return refuse(CodeInvalidGrant, "actor %q is the subject of the delegation (a cycle)", clip(a.id))
	}
	if depth := len(hops) + 1; depth > s.cfg.MaxChainDepth {
		return refuse(CodeInvalidGrant, "the delegation chain would be %d actors deep; this STS allows at most %d", depth, s.cfg.MaxChainDepth)
	}
	return nil
}

// narrowScope is the granted scope: the requested scope, which must be
// within the subject token's, or the subject's when none is requested.
func narrowScope(req tokenRequest, have []string) ([]string, *Error) {
	if !req.ScopeGiven {
		return have, nil
	}
	var wider []string
	for _, v := range req.Scope {
		if !slices.Contains(have, v) {
			wider = append(wider, v)
		}
	}
	if len(wider) > 0 {
		sort.Strings(wider)
		return nil, refuse(CodeInvalidScope, "requested scope widens the subject token's: %s", clip(strings.Join(wider, " ")))
	}
	return req.Scope, nil
}

// narrowClassification is the granted ceiling: the requested one, never above
// the subject token's, or the subject's when none is requested. A subject
// token that names no ceiling may be given one (that narrows it).
func narrowClassification(req tokenRequest, have string) (string, *Error) {
	if req.Classification == "" {
		return have, nil
	}
	want, err := task.ParseLevel(req.Classification)
	if err != nil {
		return "", refuse(CodeInvalidRequest, "classification %q is not a level (public, internal, confidential, restricted)", clip(req.Classification))
	}
	if have != "" {
		if cur, err := task.ParseLevel(have); err == nil && want.Rank() > cur.Rank() {
			return "", refuse(CodeInvalidGrant, "requested classification %s is above the subject token's ceiling %s", want, cur)
		}
	}
	return string(want), nil
}

// lifetime is the issued token's exp: within the STS's max_lifetime, the
// subject token's exp and the actor credential's, and the requested lifetime
// if any. A requested lifetime beyond either bound is refused, not cut.
func (s *Server) lifetime(req tokenRequest, now, subjExp, actorExp time.Time) (time.Time, *Error) {
	exp := now.Add(s.cfg.MaxLifetime)
	if req.Lifetime > 0 {
		if req.Lifetime > s.cfg.MaxLifetime {
			return exp, refuse(CodeInvalidGrant, "requested lifetime %s exceeds this STS's maximum %s", req.Lifetime, s.cfg.MaxLifetime)
		}
		if now.Add(req.Lifetime).After(subjExp) {
			return exp, refuse(CodeInvalidGrant, "requested lifetime %s outlives the subject token (it expires in %s)",
				req.Lifetime, max(0, subjExp.Sub(now)).Truncate(time.Second))
		}
		exp = now.Add(req.Lifetime)
	}
	if subjExp.Before(exp) {
		exp = subjExp
	}
	if !actorExp.IsZero() && actorExp.Before(exp) {
		exp = actorExp
	}
	// Whole seconds, rounded down: exp never passes the bounds by a fraction.
	exp = time.Unix(exp.Unix(), 0)
	if !exp.After(now) {
		return exp, refuse(CodeInvalidGrant, "the subject token (or the actor's credential) has expired")
	}
	return exp, nil
}

// maxChainIDBytes bounds a txn taken from a subject token.
const maxChainIDBytes = 128

// chainID is the delegation's chain id: the subject token's txn, else a new
// random 128-bit id. A txn from another issuer is kept only in a form that
// can go into a log line and a header as it is.
func chainID(v any) (string, *Error) {
	if v == nil {
		return randomID(), nil
	}
	s, ok := v.(string)
	if !ok || s == "" || len(s) > maxChainIDBytes || strings.ContainsFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~", r))
	}) {
		return "", refuse(CodeInvalidGrant, "the subject token's txn is not a chain id (1 to %d characters of A-Z a-z 0-9 - . _ ~)", maxChainIDBytes)
	}
	return s, nil
}

// randomID is 128 random bits, base64url.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// nextAct is the issued token's act: the actor with the authority the
// subject token gave it (its scope, tenant and classification, under the
// claim names of the top level), nesting the subject token's act.
func nextAct(id string, subj identity.Caller, hops []string) map[string]any {
	act := map[string]any{"sub": id}
	if len(subj.Scopes) > 0 {
		act["scope"] = strings.Join(subj.Scopes, " ")
	}
	if subj.Tenant != "" {
		act["tenant"] = subj.Tenant
	}
	if subj.Classification != "" {
		act["classification"] = subj.Classification
	}
	if prev, ok := subj.Claims["act"]; ok {
		act["act"] = prev
	} else if len(hops) == 1 {
		// The agent the subject token was issued to (chainOf): the hop before
		// the actor, so that the chain grows by exactly one.
		act["act"] = map[string]any{"sub": hops[0]}
	}
	return act
}

// clientCredentials issues an actor token to a client that authenticates
// with HTTP Basic (RFC 6749 §4.4): addressed to the STS itself, so it is
// good as an actor token here and nowhere else, and it carries no authority
// of its own.
func (s *Server) clientCredentials(st *state, req tokenRequest) (*tokenResponse, outcome, *Error) {
	out := outcome{grant: req.GrantType}
	switch {
	case !req.Basic:
		return nil, out, refuse(CodeInvalidClient, "the client_credentials grant authenticates with HTTP Basic")
	case req.SubjectToken != "" || req.ActorToken != "":
		return nil, out, refuse(CodeInvalidRequest, "the client_credentials grant takes no subject_token or actor_token")
	case req.ScopeGiven:
		return nil, out, refuse(CodeInvalidScope, "an actor token carries no scope: authority comes from the subject token")
	case req.Target != "":
		return nil, out, refuse(CodeInvalidTarget, "an actor token is addressed to this STS only")
	}
	a, e := s.authenticate(st, req)
	if e != nil {
		return nil, out, e
	}
	out.actor = a.id
	now := s.now()
	exp := time.Unix(now.Add(s.cfg.MaxLifetime).Unix(), 0)
	if req.Lifetime > 0 {
		if req.Lifetime > s.cfg.MaxLifetime {
			return nil, out, refuse(CodeInvalidGrant, "requested lifetime %s exceeds this STS's maximum %s", req.Lifetime, s.cfg.MaxLifetime)
		}
		exp = time.Unix(now.Add(req.Lifetime).Unix(), 0)
	}
	out.exp = exp
	claims := issuedClaims{Iss: st.issuer, Sub: a.id, Aud: st.issuer, ClientID: a.id, Iat: now.Unix(), Nbf: now.Unix(),
		Exp: exp.Unix(), Jti: randomID()}
	out.jti = claims.Jti
	tok, err := s.key.sign(claims)
	if err != nil {
		return nil, out, refuse(CodeServerError, "the token could not be signed").withDetail(err)
	}
	return &tokenResponse{AccessToken: tok, IssuedTokenType: TokenTypeAccessToken, TokenType: "Bearer",
		ExpiresIn: claims.Exp - claims.Iat}, out, nil
}
