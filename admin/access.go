package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
)

// Who may use the admin API. Three checks, each for its own threat:
//
//   - Host: a web page can make a browser send requests to 127.0.0.1 by
//     resolving its own name there (DNS rebinding); its requests then name
//     the attacker's host, never one of the listener's. Every request must
//     name a host the listener is, so rebinding reaches nothing.
//   - Origin: a page that knows the address can still post to it from its
//     own origin (a form, a fetch in no-cors mode). A request a browser marks
//     as from another site, or whose Origin is not its Host, is refused.
//   - Operator routes: a process that shares the listener's network (the
//     agent in writ's pod, which shares its loopback) is neither of those; it
//     needs the token, or, with none configured, the listener must be on
//     loopback only (a workstation: whoever runs there is the operator).

// access is what the checks need, computed once from Deps.
type access struct {
	// names are host names (lower case, no trailing dot) requests may use.
	names map[string]bool
	// addrs are IP addresses requests may use; anyIP: every IP address (a
	// listener on every interface is reached on the host's, the pod's IP).
	addrs map[netip.Addr]bool
	anyIP bool
	// loopbackOnly: every listener address is loopback.
	loopbackOnly bool
	// token is the SHA-256 of Deps.Token (compared in constant time); set
	// reports whether there is one.
	token [sha256.Size]byte
	set   bool
}

func newAccess(d Deps) access {
	a := access{names: map[string]bool{"localhost": true}, addrs: map[netip.Addr]bool{},
		loopbackOnly: len(d.Addrs) > 0}
	for _, hp := range d.Addrs {
		h := hostOnly(hp)
		switch ip, err := netip.ParseAddr(h); {
		case err == nil && ip.IsUnspecified():
			a.anyIP, a.loopbackOnly = true, false
		case err == nil:
			a.addrs[ip.Unmap()] = true
			a.loopbackOnly = a.loopbackOnly && ip.IsLoopback()
		case h == "localhost":
		default:
			a.names[h] = true
			a.loopbackOnly = false
		}
	}
	for _, h := range d.Hosts {
		a.names[hostOnly(h)] = true
	}
	if d.Token != "" {
		a.token, a.set = sha256.Sum256([]byte(d.Token)), true
	}
	return a
}

// hostOnly is the host of a Host header or listen address: the port, IPv6
// brackets and a trailing dot dropped, lower-cased.
func hostOnly(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "."))
}

// hostAllowed reports whether a request's Host is one the listener answers to.
func (a *access) hostAllowed(hostport string) bool {
	h := hostOnly(hostport)
	if h == "" {
		return false
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		ip = ip.Unmap()
		return ip.IsLoopback() || a.anyIP || a.addrs[ip]
	}
	return a.names[h]
}

// crossSite reports whether a browser sent r on behalf of another site: it
// says so (Sec-Fetch-Site), or its Origin is not the host it asks.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
}

// guard applies the Host and Origin checks to every request.
func (a *api) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !a.access.hostAllowed(r.Host):
			// Not an answer this listener gives for that host (RFC 9110 15.5.20).
			writeError(w, http.StatusMisdirectedRequest, "this admin listener does not answer for that host (admin_hosts names more)")
		case crossSite(r):
			writeError(w, http.StatusForbidden, "cross-origin request refused")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// operator lets a request through to an operator route when it carries the
// token, or when there is no token and the listener is on loopback only.
func (a *api) operator(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ac := &a.access
		switch {
		case ac.set:
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			if !ok || subtle.ConstantTimeCompare(sum[:], ac.token[:]) != 1 {
				a.d.Logger.Info("admin: an operator request without the admin token was refused", "path", r.URL.Path, "remote", r.RemoteAddr)
				w.Header().Set("WWW-Authenticate", `Bearer realm="writ-admin"`)
				writeError(w, http.StatusUnauthorized, "the admin token is required (Authorization: Bearer ...)")
				return
			}
		case !ac.loopbackOnly:
			a.d.Logger.Info("admin: an operator request was refused: the listener is beyond loopback and admin_token_file is not set",
				"path", r.URL.Path, "remote", r.RemoteAddr)
			writeError(w, http.StatusForbidden, "the operator routes are off: this admin listener is not on loopback only and admin_token_file is not set")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// MinTokenBytes is the shortest admin token LoadToken accepts: a token is
// compared, not rate-limited, so it must be too long to guess.
const MinTokenBytes = 32

// LoadToken reads the admin token from path (admin_token_file): the file's
// content without surrounding whitespace, at least MinTokenBytes of
// printable ASCII without spaces (what `openssl rand -hex 32` prints).
func LoadToken(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin_token_file: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if len(tok) < MinTokenBytes {
		return "", fmt.Errorf("admin_token_file: %s: the token is %d bytes; it must be at least %d (openssl rand -hex 32)", path, len(tok), MinTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c > '~' {
			return "", fmt.Errorf("admin_token_file: %s: %w", path, errTokenBytes)
		}
	}
	return tok, nil
}

var errTokenBytes = errors.New("the token must be printable ASCII without spaces")
