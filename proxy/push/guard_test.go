package push

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers from a table; answers[name][i] is the i-th lookup's
// answer (the last one repeats). It counts lookups per name.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	calls   map[string]int
}

func newFakeResolver(answers map[string][][]string) *fakeResolver {
	return &fakeResolver{answers: answers, calls: map[string]int{}}
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(seq)-1)
	r.calls[host]++
	var out []net.IPAddr
	for _, s := range seq[i] {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// noDial makes any connection attempt a test failure: refusals must happen
// before dialing, and nothing may leave loopback.
func noDial(t *testing.T, g *Guard) {
	g.dial = func(_ context.Context, _, addr string) (net.Conn, error) {
		t.Errorf("dialed %s; the guard should have refused first", addr)
		return nil, errors.New("test: dialing not allowed")
	}
}

func refusal(t *testing.T, err error) string {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not a *RefusedError", err)
	}
	return re.Reason
}

// Threat: a push callback aimed at loopback, private, link-local or cloud
// metadata addresses (SSRF). Defence: the guard refuses every non-public
// address class unless the host is explicitly trusted.
func TestCheckAddressClasses(t *testing.T) {
	cases := []struct{ ip, want string }{
		{"8.8.8.8", ""}, {"1.1.1.1", ""}, {"172.32.0.1", ""}, {"100.128.0.1", ""}, {"2606:4700:4700::1111", ""},
		{"127.0.0.1", ReasonLoopback}, {"127.255.255.254", ReasonLoopback}, {"::1", ReasonLoopback},
		{"10.0.0.1", ReasonPrivate}, {"172.16.0.1", ReasonPrivate}, {"172.31.255.255", ReasonPrivate}, {"192.168.1.1", ReasonPrivate},
		{"169.254.169.254", ReasonLinkLocal}, {"169.254.0.1", ReasonLinkLocal}, {"fe80::1", ReasonLinkLocal}, {"febf::1", ReasonLinkLocal},
		{"100.64.0.1", ReasonCGNAT}, {"100.127.255.255", ReasonCGNAT},
		{"224.0.0.1", ReasonMulticast}, {"239.255.255.250", ReasonMulticast}, {"ff02::1", ReasonMulticast},
		{"0.0.0.0", ReasonUnspecified}, {"::", ReasonUnspecified},
		{"255.255.255.255", ReasonBroadcast},
		{"240.0.0.1", ReasonReserved}, {"0.1.2.3", ReasonReserved}, {"192.0.0.8", ReasonReserved}, {"100::1", ReasonReserved}, {"4000::1", ReasonReserved},
		{"192.0.2.1", ReasonDocumentation}, {"198.51.100.7", ReasonDocumentation}, {"203.0.113.9", ReasonDocumentation}, {"2001:db8::1", ReasonDocumentation},
		{"198.18.0.1", ReasonBenchmarking},
		{"fc00::1", ReasonULA}, {"fd12:3456::1", ReasonULA},
		{"fec0::1", ReasonSiteLocal},
		{"::127.0.0.1", ReasonIPv4Compatible}, {"::8.8.8.8", ReasonIPv4Compatible},
		{"64:ff9b::7f00:1", ReasonNAT64}, {"64:ff9b::a9fe:a9fe", ReasonNAT64}, {"64:ff9b::10.1.2.3", ReasonNAT64},
		{"64:ff9b:1::8.8.8.8", ReasonNAT64}, {"64:ff9b::808:808", ""},
		{"2002:7f00:1::1", Reason6to4}, {"2002:c0a8:101::1", Reason6to4}, {"2002:a9fe:a9fe::", Reason6to4}, {"2002:808:808::1", ""},
		// Teredo: server IPv4 in bits 32-63, client IPv4 inverted in the last 32 bits.
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", ReasonTeredo}, // client 192.0.2.45
		{"2001:0:4136:e378::80ff:fffe", ReasonTeredo},          // client 127.0.0.1
		{"2001:0:a00:1::f7f7:f7f7", ReasonTeredo},              // server 10.0.0.1
		{"2001:0:4136:e378::f7f7:f7f7", ""},                    // 65.54.227.120 / 8.8.8.8
	}
	g := NewGuard(GuardConfig{})
	for _, c := range cases {
		ok, reason := g.Check(net.ParseIP(c.ip))
		if ok != (c.want == "") || reason != c.want {
			t.Errorf("Check(%s) = %v %q, want %q", c.ip, ok, reason, c.want)
		}
		ok, reason = CheckAddr(netip.MustParseAddr(c.ip))
		if ok != (c.want == "") || reason != c.want {
			t.Errorf("CheckAddr(%s) = %v %q, want %q", c.ip, ok, reason, c.want)
		}
	}
}

func TestCheckMappedAndMalformed(t *testing.T) {
	g := NewGuard(GuardConfig{})
	// netip keeps the mapped form apart: refused as such, whatever it embeds.
	for _, s := range []string{"::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:7f00:1"} {
		if ok, reason := CheckAddr(netip.MustParseAddr(s)); ok || reason != ReasonIPv4Mapped {
			t.Errorf("CheckAddr(%s) = %v %q, want ipv4_mapped", s, ok, reason)
		}
	}
	// net.IP cannot: the mapped form is the IPv4 address it carries.
	if ok, reason := g.Check(net.ParseIP("::ffff:169.254.169.254")); ok || reason != ReasonLinkLocal {
		t.Errorf("Check(::ffff:169.254.169.254) = %v %q, want link_local", ok, reason)
	}
	for _, ip := range []net.IP{nil, {}, {1, 2, 3}, make(net.IP, 5)} {
		if ok, reason := g.Check(ip); ok || reason != ReasonUnparseable {
			t.Errorf("Check(%v) = %v %q, want unparseable", []byte(ip), ok, reason)
		}
	}
	if ok, reason := CheckAddr(netip.Addr{}); ok || reason != ReasonUnparseable {
		t.Errorf("CheckAddr(zero) = %v %q", ok, reason)
	}
}

func TestCheckURL(t *testing.T) {
	cases := []struct{ url, want string }{
		{"https://agents.example.com/cb", ""},
		{"https://8.8.8.8/cb", ""},
		{"https://[2606:4700:4700::1111]/cb", ""},
		// Numeric forms a browser or libc reads as an address.
		{"http://2130706433/", ReasonLoopback},
		{"https://2130706433/", ReasonLoopback},
		{"http://0177.0.0.1/", ReasonLoopback},
		{"https://0x7f.0.0.1/", ReasonLoopback},
		{"https://0x7f000001/", ReasonLoopback},
		{"https://0X7F.1/", ReasonLoopback},
		{"https://017700000001/", ReasonLoopback},
		{"https://127.1/", ReasonLoopback},
		{"https://127.0.1/", ReasonLoopback},
		{"https://127.0.0.1./", ReasonLoopback},
		{"https://3232235777/", ReasonPrivate},   // 192.168.1.1
		{"https://2852039166/", ReasonLinkLocal}, // 169.254.169.254
		{"https://0251.0376.0251.0376/", ReasonLinkLocal},
		{"https://0xa9.0xfe.0xa9.0xfe/", ReasonLinkLocal},
		{"https://0/", ReasonUnspecified},
		{"https://134744072/", ReasonNonCanonicalIP}, // 8.8.8.8, but why spell it so
		{"https://010.8.8.8/", ReasonNonCanonicalIP},
		{"https://08.8.8.8/", ReasonUnparseable},
		{"https://256.1.1.1/", ReasonUnparseable},
		{"https://1.2.3.4.5/", ReasonUnparseable},
		{"https://4294967296/", ReasonUnparseable},
		{"https://example.123/", ReasonUnparseable},
		{"https://0xg.1/", ReasonUnparseable}, // the last label is numeric, so it must be an address
		{"https://0x7f.example.com/", ""},     // a name (DNS decides)
		// Literals.
		{"https://127.0.0.1:8443/", ReasonLoopback},
		{"https://169.254.169.254/latest/meta-data/", ReasonLinkLocal},
		{"https://[::1]/", ReasonLoopback},
		{"https://[::ffff:127.0.0.1]/", ReasonIPv4Mapped},
		{"https://[::ffff:8.8.8.8]/", ReasonIPv4Mapped},
		{"https://[64:ff9b::a9fe:a9fe]/", ReasonNAT64},
		{"https://[fe80::1%25eth0]/", ReasonLinkLocal},
		// Userinfo, whatever it claims.
		{"https://agents.bank.ae@127.0.0.1/", ReasonUserinfo},
		{"https://agents.bank.ae@8.8.8.8/", ReasonUserinfo},
		{"https://user:pass@agents.example.com/", ReasonUserinfo},
		{"https://@agents.example.com/", ReasonUserinfo},
		// Schemes.
		{"http://agents.example.com/", ReasonInsecureScheme},
		{"http://8.8.8.8/", ReasonInsecureScheme},
		{"ftp://agents.example.com/", ReasonScheme},
		{"file:///etc/passwd", ReasonScheme},
		{"https:///nohost", ReasonUnparseable},
		{"https://bad host/", ReasonUnparseable},
	}
	g := NewGuard(GuardConfig{})
	for _, c := range cases {
		err := g.CheckURL(c.url)
		if c.want == "" {
			if err != nil {
				t.Errorf("CheckURL(%s) = %v, want allowed", c.url, err)
			}
			continue
		}
		if got := refusal(t, err); got != c.want {
			t.Errorf("CheckURL(%s) = %q, want %q", c.url, got, c.want)
		}
	}
}

func TestClientRefusesBeforeDialing(t *testing.T) {
	res := newFakeResolver(map[string][][]string{
		"mixed.example.com":    {{"93.184.216.34", "10.0.0.5"}},
		"metadata.example.com": {{"169.254.169.254"}},
		"v6.example.com":       {{"2606:4700:4700::1111", "fd00::1"}},
	})
	g := NewGuard(GuardConfig{Resolver: res})
	noDial(t, g)
	c := g.Client(5*time.Second, 1024)
	cases := []struct{ url, want string }{
		{"https://mixed.example.com/cb", ReasonPrivate},
		{"https://metadata.example.com/cb", ReasonLinkLocal},
		{"https://v6.example.com/cb", ReasonULA},
		{"https://agents.bank.ae@127.0.0.1/", ReasonUserinfo},
		{"http://2130706433/", ReasonLoopback},
		{"https://0177.0.0.1/", ReasonLoopback},
		{"http://169.254.169.254/latest/meta-data/", ReasonLinkLocal},
	}
	for _, cs := range cases {
		resp, err := c.Post(cs.url, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Errorf("POST %s succeeded", cs.url)
			continue
		}
		if got := refusal(t, err); got != cs.want {
			t.Errorf("POST %s refused as %q, want %q", cs.url, got, cs.want)
		}
	}
	if n := res.count("mixed.example.com"); n != 1 {
		t.Errorf("mixed.example.com looked up %d times, want 1", n)
	}
}

// TestRebindingCannotSwapAddress: the first answer is public, every later one
// is loopback. One attempt makes one lookup and connects to the address it
// checked; the next attempt looks up again and is refused.
//
// Threat: DNS rebinding: a callback host that resolves public when checked
// and private when dialled. Defence: the address is checked at dial time, on
// the address then connected to.
func TestRebindingCannotSwapAddress(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	res := newFakeResolver(map[string][][]string{"rebind.example.com": {{"93.184.216.34"}, {"127.0.0.1"}}})
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	g := NewGuard(GuardConfig{Resolver: res, RootCAs: pool})
	var mu sync.Mutex
	var dialed []string
	g.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		// Stand in for the public host: the bytes go to the local test server.
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	c := g.Client(5*time.Second, 1024)
	url := "https://rebind.example.com:" + port + "/cb"

	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("first attempt: %v", err)
	}
	resp.Body.Close()
	if n := res.count("rebind.example.com"); n != 1 {
		t.Fatalf("lookups after one attempt = %d, want 1", n)
	}
	mu.Lock()
	if len(dialed) != 1 || dialed[0] != "93.184.216.34:"+port {
		t.Fatalf("dialed %v, want the checked address 93.184.216.34:%s", dialed, port)
	}
	mu.Unlock()

	c.CloseIdleConnections() // force a new connection, hence a new lookup
	_, err = c.Get(url)
	if got := refusal(t, err); got != ReasonLoopback {
		t.Fatalf("second attempt refused as %q, want loopback", got)
	}
	if n := res.count("rebind.example.com"); n != 2 {
		t.Fatalf("lookups after two attempts = %d, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 1 {
		t.Fatalf("dialed %v after the refusal", dialed)
	}
}

// Threat: a callback receiver redirects writ to an internal address.
// Defence: redirects are never followed.
func TestRedirectIsReturnedNotFollowed(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer srv.Close()
	g := NewGuard(GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	resp, err := g.Client(5*time.Second, 4096).Post(srv.URL+"/cb", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://169.254.169.254/latest/meta-data/" {
		t.Fatalf("got %d Location=%q, want the 302 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("server hit %d times, want 1", n)
	}
}

func TestTrustedHostOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	res := newFakeResolver(map[string][][]string{"callback.test": {{"127.0.0.1"}}})

	trusted := NewGuard(GuardConfig{TrustedHosts: []string{"127.0.0.1", "Callback.Test."}, Resolver: res})
	for _, u := range []string{srv.URL + "/cb", "http://callback.test:" + port + "/cb"} {
		resp, err := trusted.Client(5*time.Second, 1024).Get(u)
		if err != nil {
			t.Fatalf("trusted GET %s: %v", u, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("trusted GET %s = %d %q", u, resp.StatusCode, body)
		}
	}

	untrusted := NewGuard(GuardConfig{Resolver: res})
	noDial(t, untrusted)
	_, err := untrusted.Client(5*time.Second, 1024).Get(srv.URL + "/cb")
	if got := refusal(t, err); got != ReasonLoopback {
		t.Fatalf("untrusted GET refused as %q, want loopback", got)
	}
	_, err = untrusted.Client(5*time.Second, 1024).Get("https://callback.test:" + port + "/cb")
	if got := refusal(t, err); got != ReasonLoopback {
		t.Fatalf("untrusted name refused as %q, want loopback", got)
	}
}

// TestTLSVerifiesHostName: the connection goes to a checked IP, yet the
// certificate is verified against the URL's host name.
func TestTLSVerifiesHostName(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.TLS.ServerName) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	res := newFakeResolver(map[string][][]string{ // the test certificate covers example.com and *.example.com
		"agent.example.com": {{"127.0.0.1"}},
		"other.test":        {{"127.0.0.1"}},
	})
	trust := []string{"agent.example.com", "other.test"}

	g := NewGuard(GuardConfig{TrustedHosts: trust, Resolver: res, RootCAs: pool})
	resp, err := g.Client(5*time.Second, 1024).Get("https://agent.example.com:" + port + "/cb")
	if err != nil {
		t.Fatalf("GET via trusted name: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "agent.example.com" {
		t.Fatalf("server saw SNI %q, want agent.example.com", body)
	}

	_, err = g.Client(5*time.Second, 1024).Get("https://other.test:" + port + "/cb")
	var hostErr x509.HostnameError
	if !errors.As(err, &hostErr) {
		t.Fatalf("certificate for another name: err = %v, want a HostnameError", err)
	}

	noRoots := NewGuard(GuardConfig{TrustedHosts: trust, Resolver: res})
	_, err = noRoots.Client(5*time.Second, 1024).Get("https://agent.example.com:" + port + "/cb")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("unknown CA: err = %v, want an UnknownAuthorityError", err)
	}
}

func TestResponseCap(t *testing.T) {
	big := strings.Repeat("x", 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			io.WriteString(w, big[:500])
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, big[:500])
	}))
	defer srv.Close()
	g := NewGuard(GuardConfig{TrustedHosts: []string{"127.0.0.1"}})
	c := g.Client(5*time.Second, 100)

	// Known or unknown length: the status arrives, the body fails past the cap.
	for _, path := range []string{"/sized", "/chunked"} {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !errors.Is(err, ErrResponseTooLarge) || len(data) != 100 {
			t.Fatalf("%s: %d, read %d bytes, err %v; want 200, 100 bytes and ErrResponseTooLarge", path, resp.StatusCode, len(data), err)
		}
	}
	var resp *http.Response
	var data []byte
	var err error
	// Under the cap: fine.
	resp, err = g.Client(5*time.Second, 2000).Get(srv.URL + "/chunked")
	if err != nil {
		t.Fatalf("under cap: %v", err)
	}
	data, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(data) != 1000 {
		t.Fatalf("under cap: %d bytes, %v", len(data), err)
	}
}

func TestReadLimited(t *testing.T) {
	if b, err := ReadLimited(strings.NewReader("hello"), 5); err != nil || string(b) != "hello" {
		t.Fatalf("at the cap: %q %v", b, err)
	}
	if b, err := ReadLimited(strings.NewReader("hello!"), 5); !errors.Is(err, ErrResponseTooLarge) || string(b) != "hello" {
		t.Fatalf("over the cap: %q %v", b, err)
	}
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "::1", "example.com", "1.2.3.4.", "fe80::1%eth0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, kind, reason := parseHost(host)
		switch kind {
		case hostLiteral:
			if !a.IsValid() || reason != "" {
				t.Fatalf("literal %q: %v %q", host, a, reason)
			}
			if p, err := netip.ParseAddr(host); err != nil || p != a {
				t.Fatalf("literal %q parsed as %v, netip says %v %v", host, a, p, err)
			}
		case hostBad:
			if reason == "" {
				t.Fatalf("refused %q without a reason", host)
			}
		}
	})
}

func BenchmarkGuardCheck(b *testing.B) {
	g := NewGuard(GuardConfig{})
	ips := []net.IP{
		net.ParseIP("93.184.216.34"), net.ParseIP("10.1.2.3"), net.ParseIP("169.254.169.254"),
		net.ParseIP("2606:4700:4700::1111"), net.ParseIP("64:ff9b::a9fe:a9fe"), net.ParseIP("2001:0:4136:e378::f7f7:f7f7"),
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.Check(ips[i%len(ips)])
	}
}
