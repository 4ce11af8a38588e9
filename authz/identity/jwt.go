package identity

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/writ-authz/writ/internal/jsonkeys"
	"github.com/writ-authz/writ/task"
)

// jwtIssuer is one configured issuer with its defaults applied.
type jwtIssuer struct {
	name string
	// key is the issuer's configuration key (identity.jwt[i]); "" for the
	// claim mapping of an issuer Envoy verified.
	key                  string
	algs                 []jose.SignatureAlgorithm
	audiences            []string
	leeway               time.Duration
	tenantClaim          string
	scopeClaims          []string // tried in order; the first present wins
	classificationClaims []string // likewise
	keys                 *keySet
	// audienceVerified: the claims come from a verifier in front of writ that
	// checked the audience itself (VerifiedClaims of an issuer not in identity.jwt).
	audienceVerified bool
}

func newIssuer(ic IssuerConfig, key string, now func() time.Time, bg *background, client *http.Client, codeKeys []jose.JSONWebKey) (*jwtIssuer, error) {
	iss := claimMapping(ic)
	iss.key = key
	for _, a := range ic.Algorithms {
		iss.algs = append(iss.algs, asymmetric[a])
	}
	if len(codeKeys) > 0 {
		iss.keys = &keySet{}
		iss.keys.cur.Store(&keySnapshot{keys: codeKeys, fetched: now()})
		return iss, nil
	}
	if ic.JWKSFile != "" {
		ks, err := loadKeyFile(ic.JWKSFile, now())
		if err != nil {
			return nil, fmt.Errorf("%s.jwks_file: %w", key, err)
		}
		iss.keys = ks
		return iss, nil
	}
	iss.keys = &keySet{url: ic.JWKSURL, client: client, refresh: ic.JWKSRefresh, now: now, bg: bg}
	return iss, nil
}

// claimMapping is the part of an issuer that maps verified claims to a Caller:
// audiences, leeway and claim names (ic has its defaults applied).
func claimMapping(ic IssuerConfig) *jwtIssuer {
	iss := &jwtIssuer{
		name:                 ic.Issuer,
		audiences:            ic.Audiences,
		leeway:               ic.Leeway,
		tenantClaim:          ic.TenantClaim,
		scopeClaims:          []string{"scope", "scp"},
		classificationClaims: []string{"classification", "data_classification"},
	}
	if ic.ScopeClaim != "" {
		iss.scopeClaims = []string{ic.ScopeClaim}
	}
	if ic.ClassificationClaim != "" {
		iss.classificationClaims = []string{ic.ClassificationClaim}
	}
	return iss
}

// VerifiedClaims builds the Caller for a JWT claim set whose signature something in
// front of writ has already verified: Envoy's jwt_authn filter, in ext_authz mode.
// Which issuers are trusted that way is the caller's decision, made before this call;
// VerifiedClaims never checks a signature.
//
// The claims are mapped exactly as Identify maps a token it verified itself: iss and
// exp are required, exp and nbf are checked with the leeway, then tenant, scopes,
// classification and the RFC 8693 act chain. An issuer that is also configured in
// identity.jwt uses its claim names, leeway and audiences; any other issuer gets the
// defaults (tenant, scope/scp, classification/data_classification, 30s) and no
// audience check, which the verifier in front already made. Failures wrap the same
// sentinel errors as Identify's. Results are not cached: claims is owned by the
// returned Caller.
func (r *Resolver) VerifiedClaims(claims map[string]any) (Caller, error) {
	name, ok := claims["iss"].(string)
	if !ok || name == "" {
		return Anonymous(), r.claimsRefusal(claims, fmt.Errorf("%w: verified claims have no iss", ErrUnknownIssuer))
	}
	iss := r.issuers[name]
	if iss == nil {
		iss = claimMapping(IssuerConfig{Issuer: name, Leeway: defaultLeeway, TenantClaim: "tenant"})
		iss.audienceVerified = true
	}
	c, err := iss.caller(claims, r.now(), r.maxDepth, nil)
	if err != nil {
		return Anonymous(), r.claimsRefusal(claims, err)
	}
	c.ClaimsDigest = DigestClaims(c.Claims)
	return c, nil
}

// b64 decodes JOSE segments: unpadded base64url, strictly. A lenient decoder
// ignores the unused low bits of a segment's last character (and line
// breaks), so one signed token would have several spellings, each verifying:
// several token-cache keys, and a token that compares unequal to itself in
// any log or replay check. Strict refuses set padding bits; canonical below
// refuses the rest.
var b64 = base64.RawURLEncoding.Strict()

// canonical reports whether seg is the one base64url spelling of what it
// encodes: strictly decodable, with no line breaks (which every Go base64
// decoder skips).
func canonical(seg string) bool {
	if strings.ContainsAny(seg, "\r\n") {
		return false
	}
	_, err := b64.DecodeString(seg)
	return err == nil
}

// looksLikeJWS reports whether tok is in JWS compact form: three dot-separated parts,
// the first a base64url JSON object. Such a token is a JWT and is judged as one only;
// anything else may be a static token.
func looksLikeJWS(tok string) bool {
	hdr, rest, ok := strings.Cut(tok, ".")
	if !ok || strings.Count(rest, ".") != 1 {
		return false
	}
	raw, err := b64.DecodeString(hdr)
	if err != nil {
		return false
	}
	// One well-formed JSON value that is an object: what decoding it into a map
	// would accept, without building the map.
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// verifyJWT verifies a compact JWS and turns its claims into a Caller. The order
// matters: the issuer is found from the unverified iss only to pick its keys and
// algorithms; nothing from the payload is believed before the signature verifies.
// audiences, when not nil, replace the issuer's configured audiences.
func (r *Resolver) verifyJWT(tok string, now time.Time, audiences []string) (Caller, error) {
	head, rest, _ := strings.Cut(tok, ".")
	body, sig, _ := strings.Cut(rest, ".")
	// go-jose decodes the header and signature leniently: they are checked
	// here first, so a token has exactly one spelling.
	if !canonical(head) || !canonical(sig) {
		return Caller{}, fmt.Errorf("%w: header or signature is not canonical base64url", ErrTokenInvalid)
	}
	raw, err := b64.DecodeString(body)
	if err != nil || strings.ContainsAny(body, "\r\n") {
		return Caller{}, fmt.Errorf("%w: payload is not canonical base64url", ErrTokenInvalid)
	}
	// A claim named twice is read as the last by encoding/json (and writ's
	// policy) but as the first by other JSON readers a token may meet; as with
	// request bodies, such a payload is refused, not interpreted.
	if !json.Valid(raw) {
		return Caller{}, fmt.Errorf("%w: payload is not a JSON object", ErrTokenInvalid)
	}
	// JSON is UTF-8 text; bytes that are not are turned into U+FFFD differently
	// by different readers (one per byte or one per sequence), so a claim would
	// not read the same everywhere.
	if !utf8.Valid(raw) {
		return Caller{}, fmt.Errorf("%w: payload is not UTF-8", ErrTokenInvalid)
	}
	if name, twice := jsonkeys.Repeated(raw); twice {
		return Caller{}, fmt.Errorf("%w: payload names claim %q twice", ErrTokenInvalid, trunc(name))
	}
	var peek struct {
		Iss any `json:"iss"`
	}
	if err := json.Unmarshal(raw, &peek); err != nil {
		return Caller{}, fmt.Errorf("%w: payload is not a JSON object", ErrTokenInvalid)
	}
	name, ok := peek.Iss.(string)
	if !ok {
		if peek.Iss == nil {
			return Caller{}, fmt.Errorf("%w: token has no iss claim", ErrUnknownIssuer)
		}
		return Caller{}, fmt.Errorf("%w: iss is not a string", ErrClaimType)
	}
	iss := r.issuers[name]
	if iss == nil {
		return Caller{}, fmt.Errorf("%w: %q", ErrUnknownIssuer, trunc(name))
	}

	// The algorithm allow-list is what refuses alg "none" and an HS256 token "signed"
	// with the issuer's public key: neither ever reaches a key.
	jws, err := jose.ParseSignedCompact(tok, iss.algs)
	if err != nil {
		return Caller{}, fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	hdr := jws.Signatures[0].Header
	keys, err := iss.keys.find(hdr.KeyID, hdr.Algorithm)
	if err != nil {
		return Caller{}, err
	}
	var payload []byte
	for _, k := range keys {
		r.verifications.Add(1)
		if p, err := jws.Verify(k); err == nil {
			payload = p
			break
		}
	}
	if payload == nil {
		return Caller{}, fmt.Errorf("%w: %w (kid %q)", ErrTokenInvalid, ErrBadSignature, trunc(hdr.KeyID))
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return Caller{}, fmt.Errorf("%w: claims are not a JSON object", ErrTokenInvalid)
	}
	c, err := iss.caller(claims, now, r.maxDepth, audiences)
	if err != nil {
		return Caller{}, err
	}
	// The verified payload's bytes determine the claims: their digest stands
	// for the claims without encoding them again.
	c.ClaimsDigest = digestPayload(payload)
	return c, nil
}

// caller checks verified claims and maps them to a Caller. audiences, when
// not nil, are the accepted audiences instead of the issuer's own.
func (iss *jwtIssuer) caller(claims map[string]any, now time.Time, maxDepth int, audiences []string) (Caller, error) {
	if s, _ := claims["iss"].(string); s != iss.name {
		return Caller{}, fmt.Errorf("%w: iss changed after verification", ErrTokenInvalid)
	}
	switch {
	case audiences != nil:
		if err := checkAudience(claims["aud"], audiences); err != nil {
			return Caller{}, err
		}
	case !iss.audienceVerified:
		if err := checkAudience(claims["aud"], iss.audiences); err != nil {
			return Caller{}, err
		}
	}
	exp, ok, err := numericDate(claims, "exp")
	if err != nil {
		return Caller{}, err
	}
	// A token without exp would be valid forever, and cached forever: refuse it.
	if !ok {
		return Caller{}, fmt.Errorf("%w: token has no exp claim", ErrTokenInvalid)
	}
	if now.After(exp.Add(iss.leeway)) {
		return Caller{}, fmt.Errorf("%w: at %s", ErrTokenExpired, exp.UTC().Format(time.RFC3339))
	}
	nbf, ok, err := numericDate(claims, "nbf")
	if err != nil {
		return Caller{}, err
	}
	if ok && now.Add(iss.leeway).Before(nbf) {
		return Caller{}, fmt.Errorf("%w: not before %s", ErrTokenNotYetValid, nbf.UTC().Format(time.RFC3339))
	}

	c := Caller{Authenticated: true, Method: MethodJWT, Issuer: iss.name, Claims: claims, Expires: exp}
	if c.Tenant, err = stringClaim(claims, iss.tenantClaim); err != nil {
		return Caller{}, err
	}
	if c.ChainID, err = stringClaim(claims, "txn"); err != nil {
		return Caller{}, err
	}
	if c.Scopes, err = iss.scopes(claims); err != nil {
		return Caller{}, err
	}
	if c.Classification, err = iss.classification(claims); err != nil {
		return Caller{}, err
	}
	if c.AgentID, c.UserID, c.Chain, err = actors(claims, maxDepth); err != nil {
		return Caller{}, err
	}
	if c.Hops, err = iss.hops(claims); err != nil {
		return Caller{}, err
	}
	return c, nil
}

// hops reads the authority each actor of an RFC 8693 act chain held when it
// delegated, where the act objects carry it (writ's STS writes scope, tenant
// and classification into each, under the top level's claim names): oldest
// first, the caller last, aligned with Chain and AgentID. A token without
// act, or whose act objects carry none of them, has no hops. actors has
// already bounded the nesting and checked every act.sub.
func (iss *jwtIssuer) hops(claims map[string]any) ([]Hop, error) {
	var out []Hop // outermost first
	granted := false
	for act, ok := claims["act"].(map[string]any); ok; act, ok = act["act"].(map[string]any) {
		h := Hop{AgentID: act["sub"].(string)}
		var err error
		if h.Scopes, err = iss.scopes(act); err != nil {
			return nil, fmt.Errorf("act of %s: %w", h.AgentID, err)
		}
		if h.Tenant, err = stringClaim(act, iss.tenantClaim); err != nil {
			return nil, fmt.Errorf("act of %s: %w", h.AgentID, err)
		}
		if h.Classification, err = iss.classification(act); err != nil {
			return nil, fmt.Errorf("act of %s: %w", h.AgentID, err)
		}
		h.HasScopes = hasAny(act, iss.scopeClaims)
		granted = granted || h.HasScopes || h.Tenant != "" || h.Classification != ""
		out = append(out, h)
	}
	if !granted {
		return nil, nil
	}
	slices.Reverse(out)
	return out, nil
}

// hasAny reports whether claims has any of names.
func hasAny(claims map[string]any, names []string) bool {
	for _, n := range names {
		if _, ok := claims[n]; ok {
			return true
		}
	}
	return false
}

// checkAudience accepts an aud claim that names one of accepted.
func checkAudience(v any, accepted []string) error {
	var auds []string
	switch a := v.(type) {
	case nil:
		return fmt.Errorf("%w: token has no aud claim", ErrTokenInvalid)
	case string:
		auds = []string{a}
	case []any:
		for _, x := range a {
			s, ok := x.(string)
			if !ok {
				return fmt.Errorf("%w: aud is not a string or a list of strings", ErrClaimType)
			}
			auds = append(auds, s)
		}
	default:
		return fmt.Errorf("%w: aud is not a string or a list of strings", ErrClaimType)
	}
	for _, a := range auds {
		for _, want := range accepted {
			if a == want {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %w", ErrTokenInvalid, ErrAudienceRejected)
}

// maxNumericDate is 9999-12-31: a later exp is a malformed token, not a long-lived one.
const maxNumericDate = 253402300799

// numericDate reads an RFC 7519 NumericDate claim; ok is false when it is absent.
func numericDate(claims map[string]any, name string) (t time.Time, ok bool, err error) {
	v, present := claims[name]
	if !present || v == nil {
		return time.Time{}, false, nil
	}
	f, isNum := v.(float64)
	if !isNum || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, fmt.Errorf("%w: %s is not a NumericDate", ErrClaimType, name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// stringClaim reads an optional string claim; JSON null counts as absent.
func stringClaim(claims map[string]any, name string) (string, error) {
	v, ok := claims[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s is not a string", ErrClaimType, name)
	}
	return s, nil
}

// scopes reads the first scope claim present: a space-separated string (OAuth's
// "scope") or a list of strings (the common "scp").
func (iss *jwtIssuer) scopes(claims map[string]any) ([]string, error) {
	for _, name := range iss.scopeClaims {
		switch v := claims[name].(type) {
		case nil:
			continue
		case string:
			return strings.Fields(v), nil
		case []any:
			out := make([]string, 0, len(v))
			for _, x := range v {
				s, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("%w: %s is not a list of strings", ErrClaimType, name)
				}
				out = append(out, s)
			}
			return out, nil
		default:
			return nil, fmt.Errorf("%w: %s is not a string or a list of strings", ErrClaimType, name)
		}
	}
	return nil, nil
}

// classification reads the first classification claim present and refuses an unknown
// level: a token that mislabels its clearance must not pass as having none.
func (iss *jwtIssuer) classification(claims map[string]any) (string, error) {
	for _, name := range iss.classificationClaims {
		s, err := stringClaim(claims, name)
		if err != nil {
			return "", err
		}
		if s == "" {
			continue
		}
		if _, err := task.ParseLevel(s); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrClaimType, name, err)
		}
		return s, nil
	}
	return "", nil
}

// actors reads RFC 8693 delegation. With act, sub is the user, the outermost act.sub is
// the calling agent and deeper act.subs are earlier hops, returned oldest first.
// Without act, the agent is azp, else client_id, else sub, and there is no user.
//
// The act nesting is walked in a loop bounded by maxDepth, not recursively, so a
// hostile token costs at most maxDepth steps here.
func actors(claims map[string]any, maxDepth int) (agent, user string, chain []string, err error) {
	act, ok := claims["act"]
	if !ok {
		for _, name := range []string{"azp", "client_id", "sub"} {
			if agent, err = stringClaim(claims, name); err != nil || agent != "" {
				return agent, "", nil, err
			}
		}
		return "", "", nil, fmt.Errorf("%w: token names no subject (azp, client_id or sub)", ErrTokenInvalid)
	}
	if user, err = stringClaim(claims, "sub"); err != nil {
		return "", "", nil, err
	}
	var hops []string // outermost (current actor) first
	for depth := 1; ; depth++ {
		if depth > maxDepth {
			return "", "", nil, fmt.Errorf("%w: act nested deeper than %d", ErrChainTooDeep, maxDepth)
		}
		obj, ok := act.(map[string]any)
		if !ok {
			return "", "", nil, fmt.Errorf("%w: act at depth %d is not an object", ErrClaimType, depth)
		}
		sub, ok := obj["sub"].(string)
		if !ok || sub == "" {
			return "", "", nil, fmt.Errorf("%w: act.sub at depth %d is not a non-empty string", ErrClaimType, depth)
		}
		hops = append(hops, sub)
		if act, ok = obj["act"]; !ok {
			break
		}
	}
	for i := len(hops) - 1; i >= 1; i-- {
		chain = append(chain, hops[i])
	}
	return hops[0], user, chain, nil
}
