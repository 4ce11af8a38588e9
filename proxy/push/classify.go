// Package push delivers task notifications to caller-supplied callbacks, safely.
package push

import (
	"net"
	"net/netip"
	"strings"
)

// Refusal reasons. They are stable codes: metrics label refusals with them and
// tests assert them, so a value never changes meaning once released.
const (
	ReasonLoopback       = "loopback"        // 127/8, ::1
	ReasonPrivate        = "private"         // 10/8, 172.16/12, 192.168/16
	ReasonLinkLocal      = "link_local"      // 169.254/16 (cloud metadata), fe80::/10
	ReasonCGNAT          = "cgnat"           // 100.64/10
	ReasonMulticast      = "multicast"       // 224/4, ff00::/8
	ReasonUnspecified    = "unspecified"     // 0.0.0.0, ::
	ReasonBroadcast      = "broadcast"       // 255.255.255.255
	ReasonReserved       = "reserved"        // 0/8, 240/4, 192.0.0/24, 100::/64, IPv6 outside 2000::/3
	ReasonDocumentation  = "documentation"   // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
	ReasonBenchmarking   = "benchmarking"    // 198.18/15, 2001:2::/48
	ReasonULA            = "ula"             // fc00::/7
	ReasonSiteLocal      = "site_local"      // fec0::/10 (deprecated, still routed internally)
	ReasonIPv4Mapped     = "ipv4_mapped"     // ::ffff:a.b.c.d
	ReasonIPv4Compatible = "ipv4_compatible" // ::a.b.c.d
	ReasonNAT64          = "nat64"           // 64:ff9b::/96 embedding a refused IPv4; 64:ff9b:1::/48
	Reason6to4           = "6to4"            // 2002::/16 embedding a refused IPv4
	ReasonTeredo         = "teredo"          // 2001::/32 whose server or client IPv4 is refused
	ReasonUnparseable    = "unparseable"     // no address, or a host that is neither a name nor an IP
	ReasonNonCanonicalIP = "noncanonical_ip" // a public address written as 2130706433, 0x7f.1, 010.0.0.1, ...
	ReasonUserinfo       = "userinfo"        // user@host in the URL
	ReasonScheme         = "scheme"          // neither https nor http
	ReasonInsecureScheme = "insecure_scheme" // http to a host that is not trusted
	ReasonHeaderValue    = "header_value"    // a header value that is not printable ASCII (wire.HeaderValue)
)

type rule struct {
	prefix netip.Prefix
	reason string
}

func rules(pairs ...string) []rule {
	out := make([]rule, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, rule{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// Order matters: the first matching prefix names the reason.
var v4Rules = rules(
	"0.0.0.0/32", ReasonUnspecified,
	"0.0.0.0/8", ReasonReserved,
	"10.0.0.0/8", ReasonPrivate,
	"100.64.0.0/10", ReasonCGNAT,
	"127.0.0.0/8", ReasonLoopback,
	"169.254.0.0/16", ReasonLinkLocal,
	"172.16.0.0/12", ReasonPrivate,
	"192.0.0.0/24", ReasonReserved,
	"192.0.2.0/24", ReasonDocumentation,
	"192.88.99.0/24", ReasonReserved,
	"192.168.0.0/16", ReasonPrivate,
	"198.18.0.0/15", ReasonBenchmarking,
	"198.51.100.0/24", ReasonDocumentation,
	"203.0.113.0/24", ReasonDocumentation,
	"224.0.0.0/4", ReasonMulticast,
	"255.255.255.255/32", ReasonBroadcast,
	"240.0.0.0/4", ReasonReserved,
)

var v6Rules = rules(
	"::/128", ReasonUnspecified,
	"::1/128", ReasonLoopback,
	"::ffff:0:0/96", ReasonIPv4Mapped,
	"::/96", ReasonIPv4Compatible,
	"64:ff9b:1::/48", ReasonNAT64, // local-use NAT64: the embedding depends on the site, refuse it whole
	"100::/64", ReasonReserved,
	"2001:db8::/32", ReasonDocumentation,
	"3fff::/20", ReasonDocumentation,
	"2001:2::/48", ReasonBenchmarking,
	"fc00::/7", ReasonULA,
	"fe80::/10", ReasonLinkLocal,
	"fec0::/10", ReasonSiteLocal,
	"ff00::/8", ReasonMulticast,
)

var (
	nat64Prefix   = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	teredoPrefix  = netip.MustParsePrefix("2001::/32")
	globalUnicast = netip.MustParsePrefix("2000::/3")
)

// CheckAddr classifies one address precisely: unlike net.IP, a netip.Addr keeps
// ::ffff:a.b.c.d apart from a.b.c.d, so the mapped form is refused as
// ipv4_mapped. A zone is ignored (the address is classified without it).
func CheckAddr(a netip.Addr) (ok bool, reason string) {
	switch {
	case !a.IsValid():
		return false, ReasonUnparseable
	case a.Is4():
		return checkV4(a)
	}
	a = a.WithZone("")
	for _, r := range v6Rules {
		if r.prefix.Contains(a) {
			return false, r.reason
		}
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		if ok, _ := checkV4(netip.AddrFrom4([4]byte(b[12:16]))); !ok {
			return false, ReasonNAT64
		}
		return true, ""
	case sixToFour.Contains(a):
		if ok, _ := checkV4(netip.AddrFrom4([4]byte(b[2:6]))); !ok {
			return false, Reason6to4
		}
		return true, ""
	case teredoPrefix.Contains(a):
		server := netip.AddrFrom4([4]byte(b[4:8]))
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		okS, _ := checkV4(server)
		okC, _ := checkV4(client)
		if !okS || !okC {
			return false, ReasonTeredo
		}
		return true, ""
	case !globalUnicast.Contains(a):
		return false, ReasonReserved
	}
	return true, ""
}

func checkV4(a netip.Addr) (bool, string) {
	for _, r := range v4Rules {
		if r.prefix.Contains(a) {
			return false, r.reason
		}
	}
	return true, ""
}

// toAddr converts a net.IP. net.IP cannot tell ::ffff:a.b.c.d from a.b.c.d (Go
// stores every IPv4 address, including resolver answers, in the 16-byte mapped
// form), so a mapped address is classified as the IPv4 address it carries; an
// IPv4 address is what the dial would reach anyway.
func toAddr(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// hostKind is what a URL host turned out to be.
type hostKind int

const (
	hostBad     hostKind = iota // refused by its form; reason says why
	hostName                    // a DNS name to resolve
	hostLiteral                 // a canonical IP literal
)

// parseHost reads the host of a URL (no port, no brackets) the way a browser
// or libc would. A canonical IPv4 dotted quad or an IPv6 literal is a literal;
// a name must be ASCII (an IDN in its xn-- form). Anything numeric in another
// form (2130706433, 0177.0.0.1, 0x7f.1, 127.1, 127.0.0.1.) is refused: with the
// class of the address it denotes when that class is refused, else as
// noncanonical_ip. A caller-supplied callback has no reason to spell an address
// that way except to slip past a filter.
func parseHost(host string) (netip.Addr, hostKind, string) {
	if host == "" || len(host) > 253 {
		return netip.Addr{}, hostBad, ReasonUnparseable
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return netip.Addr{}, hostBad, ReasonUnparseable
		}
		if a.Zone() != "" {
			if ok, reason := CheckAddr(a); !ok {
				return netip.Addr{}, hostBad, reason
			}
			return netip.Addr{}, hostBad, ReasonUnparseable
		}
		return a, hostLiteral, ""
	}
	if endsInNumber(host) {
		a, ok := parseIPv4Loose(host)
		if !ok {
			return netip.Addr{}, hostBad, ReasonUnparseable
		}
		if a.String() == host {
			return a, hostLiteral, ""
		}
		if ok, reason := CheckAddr(a); !ok {
			return a, hostBad, reason
		}
		return a, hostBad, ReasonNonCanonicalIP
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return netip.Addr{}, hostBad, ReasonUnparseable
		}
	}
	return netip.Addr{}, hostName, ""
}

// endsInNumber is the WHATWG URL "ends in a number" test: a host whose last
// label is numeric must be an IPv4 address (or nothing).
func endsInNumber(host string) bool {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last == "" {
		return false
	}
	if allIn(last, "0123456789") {
		return true
	}
	return (strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X")) && allIn(last[2:], "0123456789abcdefABCDEF")
}

func allIn(s, set string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(set, rune(s[i])) {
			return false
		}
	}
	return true
}

// parseIPv4Loose is inet_aton: one to four parts, each decimal, octal (leading
// 0) or hex (0x); the last part fills the remaining bytes (a, a.b, a.b.c).
func parseIPv4Loose(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (5 - len(parts)))
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Number(p string) (uint64, bool) {
	base, digits := uint64(10), p
	switch {
	case p == "":
		return 0, false
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		base, digits = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		var d uint64
		switch c := digits[i]; {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		n = n*base + d
		if n > 1<<32 {
			return 0, false
		}
	}
	return n, true
}
