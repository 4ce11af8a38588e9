package push

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies it;
// tests inject fakes. It must be safe for concurrent use.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// GuardConfig configures a Guard.
type GuardConfig struct {
	// TrustedHosts are exact host names or IP literals that may resolve to
	// otherwise refused addresses and may be reached over http. Keep it short:
	// every entry is a hole in the SSRF guard.
	TrustedHosts []string
	// Resolver resolves callback host names; default net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds the lookup plus the TCP connect; default 10s.
	DialTimeout time.Duration
	// RootCAs verifies receivers' certificates; nil means the system pool.
	RootCAs *x509.CertPool
}

// Guard refuses outbound connections to addresses a caller-supplied callback
// must not reach. It checks at dial time, on the address it then connects to,
// so DNS rebinding and redirects cannot get around it. Safe for concurrent use.
type Guard struct {
	trusted  map[string]bool
	resolver Resolver
	dialer   net.Dialer
	// dial connects to an already checked ip:port; tests replace it to prove
	// where the connection goes without sending traffic there.
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	transport *http.Transport
}

// RefusedError is the error of a request the guard refused; Reason is one of
// the Reason* codes. Retrieve it with errors.As.
type RefusedError struct {
	Host   string
	Reason string
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("push: refused to connect to %q: %s", e.Host, e.Reason)
}

// ErrResponseTooLarge is returned by a response body that exceeds the cap
// given to Guard.Client.
var ErrResponseTooLarge = errors.New("push: response body exceeds the cap")

// NewGuard builds a Guard from c.
func NewGuard(c GuardConfig) *Guard {
	g := &Guard{trusted: map[string]bool{}, resolver: c.Resolver}
	for _, h := range c.TrustedHosts {
		g.trusted[normalizeHost(h)] = true
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	timeout := c.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	g.dialer = net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	g.dial = g.dialer.DialContext
	g.transport = &http.Transport{
		Proxy:                  nil, // a proxy would make the connection for us, unchecked
		DialContext:            g.dialContext,
		TLSClientConfig:        &tls.Config{RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    timeout,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return g
}

// normalizeHost gives the form TrustedHosts are matched in: an IP literal in
// its canonical text, a name in lower case without a trailing dot.
func normalizeHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(h, "]"), "["), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String()
	}
	return strings.ToLower(h)
}

func (g *Guard) isTrusted(host string) bool {
	return len(g.trusted) > 0 && g.trusted[normalizeHost(host)]
}

// Check classifies one address: ok, or refused with a stable reason. A nil or
// malformed ip is unparseable. See CheckAddr for the IPv4-mapped caveat.
func (g *Guard) Check(ip net.IP) (ok bool, reason string) {
	a, valid := toAddr(ip)
	if !valid {
		return false, ReasonUnparseable
	}
	return CheckAddr(a)
}

// Client returns an HTTP client that connects only to checked addresses,
// follows no redirects (a 3xx is returned as the response), refuses plain http
// and userinfo and obfuscated numeric hosts, times out after timeout, and
// fails reading a body past maxResponseBytes (default 64 KiB when <= 0).
// Clients from one Guard share its connection pool.
func (g *Guard) Client(timeout time.Duration, maxResponseBytes int64) *http.Client {
	if maxResponseBytes <= 0 {
		maxResponseBytes = 64 << 10
	}
	return &http.Client{
		Transport: &guardedTransport{g: g, max: maxResponseBytes},
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// CheckURL applies the checks that need no DNS lookup: scheme, userinfo, the
// form of the host, and the class of a literal address. The dial checks the
// resolved addresses of a name.
func (g *Guard) CheckURL(u string) error {
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		return &RefusedError{Reason: ReasonUnparseable}
	}
	return g.checkRequest(req)
}

func (g *Guard) checkRequest(req *http.Request) error {
	u := req.URL
	host := u.Hostname()
	if u.User != nil {
		return &RefusedError{Host: host, Reason: ReasonUserinfo}
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return &RefusedError{Host: host, Reason: ReasonScheme}
	}
	addr, kind, reason := parseHost(host)
	if kind == hostBad {
		return &RefusedError{Host: host, Reason: reason}
	}
	trusted := g.isTrusted(host)
	if kind == hostLiteral && !trusted {
		if ok, reason := CheckAddr(addr); !ok {
			return &RefusedError{Host: host, Reason: reason}
		}
	}
	if scheme == "http" && !trusted {
		return &RefusedError{Host: host, Reason: ReasonInsecureScheme}
	}
	return nil
}

// dialContext resolves the host once, refuses if any answer is refused, and
// connects to a checked address itself: no second lookup happens, so a DNS
// answer cannot change between the check and the connect. The transport still
// does TLS against the host name, so the certificate is verified for it.
func (g *Guard) dialContext(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, &RefusedError{Host: hostport, Reason: ReasonUnparseable}
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, &RefusedError{Host: host, Reason: ReasonUnparseable}
	}
	addr, kind, reason := parseHost(host)
	trusted := g.isTrusted(host)
	var addrs []netip.Addr
	switch kind {
	case hostBad:
		return nil, &RefusedError{Host: host, Reason: reason}
	case hostLiteral:
		addrs = []netip.Addr{addr}
	case hostName:
		if addrs, err = g.lookup(ctx, host); err != nil {
			return nil, err
		}
	}
	if !trusted {
		for _, a := range addrs {
			if ok, reason := CheckAddr(a); !ok {
				return nil, &RefusedError{Host: host, Reason: reason}
			}
		}
	}
	var firstErr error
	for _, a := range addrs {
		c, err := g.dial(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// lookup resolves host once, bounded by the dial timeout.
func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, g.dialer.Timeout)
	defer cancel()
	ipas, err := g.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, 0, len(ipas))
	for _, ipa := range ipas {
		a, ok := toAddr(ipa.IP)
		if !ok {
			return nil, &RefusedError{Host: host, Reason: ReasonUnparseable}
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// guardedTransport checks each request before the shared transport sees it
// and caps the body of each response.
type guardedTransport struct {
	g   *Guard
	max int64
}

var _ http.RoundTripper = (*guardedTransport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.g.checkRequest(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := t.g.transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// The status stays readable whatever the size: a receiver that accepted
	// a notification with a large answer still accepted it.
	resp.Body = &cappedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

// CloseIdleConnections closes the Guard's idle connections (all its clients').
func (t *guardedTransport) CloseIdleConnections() { t.g.transport.CloseIdleConnections() }

// cappedBody fails with ErrResponseTooLarge once more than its cap is read.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), ErrResponseTooLarge
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// ReadLimited reads r to its end, but at most n bytes: more is
// ErrResponseTooLarge, with the first n bytes returned.
func ReadLimited(r io.Reader, n int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, n+1))
	if int64(len(data)) > n {
		return data[:n], ErrResponseTooLarge
	}
	return data, err
}
