package proxy

import (
	"net/http"
	"strings"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/proxy/writheader"
)

// coreHeaders are the request headers the core itself decides on: the host
// (routing), the framing, and writ's own headers. The adapters name theirs
// (adapters.Edge.DecisionHeaders), identity its credentials.
var coreHeaders = append([]string{"Host", "Content-Length", "Transfer-Encoding"}, writheader.Names...)

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
