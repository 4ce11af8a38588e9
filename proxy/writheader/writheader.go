// Package writheader is writ's own headers on a forwarded request: the
// verified caller (Writ-Caller, as ASCII JSON) and the decision id
// (Writ-Decision-Id), and every spelling of them a server might fold into
// one, which no caller may send; and the mark on the answers writ gives
// itself (Writ-Answered-By). It is a leaf of the core so that its
// encoder is fuzzed without the rest of writ (the decision path, OPA)
// instrumented with it.
package writheader

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/writ-authz/writ/authz/identity"
)

// Caller carries the verified caller to the upstream agent. writ sets it on
// every forwarded request and strips it from every inbound one, so an agent can
// trust it as long as only writ can reach the agent.
const Caller = "Writ-Caller"

// Decision carries the id of the decision that let a request through (or
// refused it), to find it in the decision log.
const Decision = "Writ-Decision-Id"

// callerDoc is the JSON of the Writ-Caller header.
type callerDoc struct {
	Authenticated bool     `json:"authenticated"`
	Method        string   `json:"method"`
	Issuer        string   `json:"issuer,omitempty"`
	AgentID       string   `json:"agent_id,omitempty"`
	UserID        string   `json:"user_id,omitempty"`
	Tenant        string   `json:"tenant,omitempty"`
	Chain         []string `json:"chain"`
}

// CallerValue is the Writ-Caller header's value for c: its JSON, in
// printable ASCII only.
func CallerValue(c identity.Caller) string {
	if s, ok := plainCallerHeader(c); ok {
		return s
	}
	return marshaledCallerHeader(c)
}

// marshaledCallerHeader is the header as encoding/json writes callerDoc, for any
// caller, with every character outside printable ASCII escaped (asciiJSON):
// what plainCallerHeader reproduces byte for byte for the usual caller.
func marshaledCallerHeader(c identity.Caller) string {
	chain := c.Chain
	if chain == nil {
		chain = []string{}
	}
	// Strings, a bool and a list of strings always encode: there is no error.
	raw, _ := json.Marshal(callerDoc{Authenticated: c.Authenticated, Method: c.Method, Issuer: c.Issuer,
		AgentID: c.AgentID, UserID: c.UserID, Tenant: c.Tenant, Chain: chain})
	return asciiJSON(raw)
}

// asciiJSON rewrites JSON text (as encoding/json writes it: valid UTF-8, control
// characters already escaped) so that it is printable ASCII: every other
// character becomes a \uXXXX escape (a UTF-16 surrogate pair above U+FFFF),
// which every JSON reader decodes to the same string. A header's bytes are
// read as UTF-8 by some servers and as Latin-1 by others (Node, Python's
// WSGI): raw UTF-8 in Writ-Caller would name a different agent to each.
// Outside strings JSON text is ASCII already, so only string contents change.
func asciiJSON(raw []byte) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(raw)+16)
	u := func(r rune) {
		b = append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
	}
	for _, r := range string(raw) {
		switch {
		case r >= 0x20 && r < 0x7f:
			b = append(b, byte(r))
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			u(hi)
			u(lo)
		default:
			u(r)
		}
	}
	return string(b)
}

// plainCallerHeader writes the header as json.Marshal writes callerDoc, byte
// for byte, when every string of the caller is printable ASCII that JSON (with
// encoding/json's HTML escaping) writes as it is: the usual caller, with no
// reflection. ok is false for any other caller.
func plainCallerHeader(c identity.Caller) (string, bool) {
	var buf [256]byte
	b := append(buf[:0], `{"authenticated":`...)
	b = strconv.AppendBool(b, c.Authenticated)
	b = append(b, `,"method":`...)
	b, ok := appendPlain(b, c.Method)
	for _, f := range [...]struct{ name, v string }{{`,"issuer":`, c.Issuer}, {`,"agent_id":`, c.AgentID},
		{`,"user_id":`, c.UserID}, {`,"tenant":`, c.Tenant}} {
		if ok && f.v != "" {
			b = append(b, f.name...)
			b, ok = appendPlain(b, f.v)
		}
	}
	b = append(b, `,"chain":[`...)
	for i, s := range c.Chain {
		if i > 0 {
			b = append(b, ',')
		}
		if ok {
			b, ok = appendPlain(b, s)
		}
	}
	if !ok {
		return "", false
	}
	return string(append(b, "]}"...)), true
}

// appendPlain appends s as a JSON string when encoding/json writes it
// unescaped (printable ASCII but for '"', '\\', '<', '>' and '&').
func appendPlain(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if ch := s[i]; ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' || ch == '<' || ch == '>' || ch == '&' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// AnsweredBy marks an answer writ gave itself, with the value Writ: a
// refusal (a denial, bad input, a missing task, a 401), writ's own answer to
// an admitted request (a card, the directory, a push-config operation), a
// fault in place of the agent's answer (the agent unreachable, too slow, or
// answering what writ cannot pass on). An answer that is the agent's own
// never carries it: writ removes an agent's copy wherever it sees the
// answer (the sidecar, ext_proc; not behind ext_authz, which never sees
// answers). So a caller and a log reader can tell writ's refusals from the
// agent's: an error without it is the agent's, passed on as it answered.
// Writ-Decision-Id stays on both: it finds the decision that let the
// request through, or refused it.
const AnsweredBy = "Writ-Answered-By"

// Writ is AnsweredBy's value: the header names writ.
const Writ = "writ"

// Mark returns h (allocated when nil) marked as writ's own answer
// (AnsweredBy). It changes h in place.
func Mark(h http.Header) http.Header {
	if h == nil {
		h = http.Header{}
	}
	h.Set(AnsweredBy, Writ)
	return h
}

// Unmark removes AnsweredBy, in any case, from the headers of an answer that
// is not writ's (in place): an agent cannot pass its answer off as writ's.
func Unmark(h http.Header) {
	for k := range h {
		if strings.EqualFold(k, AnsweredBy) {
			delete(h, k)
		}
	}
}

// Parent names, on a call the protected agent makes through writ's egress
// listener, the inbound request the call serves: the Writ-Decision-Id the
// agent received with it. The egress door reads it; it never travels on.
const Parent = "Writ-Parent"

// Names are writ's own headers: those it sets for the upstream, which a
// caller may never set itself, and the one its agent sets for writ alone.
var Names = []string{Caller, Decision, Parent}

// Is reports whether a header name is one of writ's, in any spelling
// a server might fold into it: case, and '_' for '-' (CGI-style servers and
// some frameworks read Writ_Caller as Writ-Caller).
func Is(name string) bool {
	n := strings.ReplaceAll(name, "_", "-")
	for _, w := range Names {
		if strings.EqualFold(n, w) {
			return true
		}
	}
	return false
}

// Spellings lists the header names in h that servers would fold into one
// of writ's own headers (any case, '_' for '-'), as the request spelled them,
// sorted: what the Envoy doors tell Envoy to remove before the agent sees the
// request.
func Spellings(h http.Header) []string {
	var out []string
	for k := range h {
		if Is(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Strip removes writ's own headers, in every spelling, from h (in place) and
// returns it.
func Strip(h http.Header) http.Header {
	for k := range h {
		if Is(k) {
			delete(h, k)
		}
	}
	return h
}

// ParseCaller reads a Writ-Caller value back into the caller it was written
// for (CallerValue's inverse): a followed task resumed after a restart acts
// as the caller its request was forwarded for.
func ParseCaller(v string) (identity.Caller, error) {
	var doc callerDoc
	if err := json.Unmarshal([]byte(v), &doc); err != nil {
		return identity.Caller{}, err
	}
	return identity.Caller{Authenticated: doc.Authenticated, Method: doc.Method, Issuer: doc.Issuer,
		AgentID: doc.AgentID, UserID: doc.UserID, Tenant: doc.Tenant, Chain: doc.Chain}, nil
}
