package proxy

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/writ-authz/writ/authz/identity"
)

// CallerHeader carries the verified caller to the upstream agent. writ sets it on
// every forwarded request and strips it from every inbound one, so an agent can
// trust it as long as only writ can reach the agent.
const CallerHeader = "Writ-Caller"

// DecisionHeader carries the id of the decision that let a request through (or
// refused it), to find it in the decision log.
const DecisionHeader = "Writ-Decision-Id"

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

func callerHeader(c identity.Caller) string {
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

// writHeaders are the headers writ sets for the upstream, which a caller may
// never set itself.
var writHeaders = []string{CallerHeader, DecisionHeader}

// IsWritHeader reports whether a header name is one of writ's, in any spelling
// a server might fold into it: case, and '_' for '-' (CGI-style servers and
// some frameworks read Writ_Caller as Writ-Caller).
func IsWritHeader(name string) bool {
	n := strings.ReplaceAll(name, "_", "-")
	for _, w := range writHeaders {
		if strings.EqualFold(n, w) {
			return true
		}
	}
	return false
}

// WritSpellings lists the header names in h that servers would fold into one
// of writ's own headers (any case, '_' for '-'), as the request spelled them,
// sorted: what the Envoy doors tell Envoy to remove before the agent sees the
// request.
func WritSpellings(h http.Header) []string {
	var out []string
	for k := range h {
		if IsWritHeader(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// stripWritHeaders removes writ's own headers, in every spelling, from h (in
// place) and returns it.
func stripWritHeaders(h http.Header) http.Header {
	for k := range h {
		if IsWritHeader(k) {
			delete(h, k)
		}
	}
	return h
}

// coreHeaders are the request headers the core itself decides on: the host
// (routing), the framing, and writ's own headers. The adapters name theirs
// (adapters.Edge.DecisionHeaders), identity its credentials.
var coreHeaders = append([]string{"Host", "Content-Length", "Transfer-Encoding"}, writHeaders...)

// connectionNamesDecisionHeader returns a header the decision depends on —
// the core's, the credentials, or one the request's adapter reads — that the
// request's Connection header names, "" when it names none. Forwarding drops
// every header Connection names (stripHop, as RFC 9110 section 7.6.1 asks of
// a proxy), so the agent would not receive what writ decided on: such a
// request is refused before the decision.
func connectionNamesDecisionHeader(h http.Header, adapterHeaders []string) string {
	for _, f := range h.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			name = strings.TrimSpace(name)
			for _, list := range [][]string{coreHeaders, identity.CredentialHeaders, adapterHeaders} {
				for _, d := range list {
					if strings.EqualFold(name, d) {
						return d
					}
				}
			}
		}
	}
	return ""
}

// hopHeaders are connection-level headers that a proxy must not forward
// (RFC 9110 section 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func stripHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}
