// Package canonical is the canonical form of a request target: the one
// spelling of it that every router reads alike. writ routes on the decoded
// path and a host it lower-cases and strips of a trailing dot; a router in front (Envoy, by default) matches the
// raw :path and the :authority as sent. Where the two readings can differ,
// writ could decide for one agent while the router forwards to another, so a
// request in any other form is refused before anything is routed (a plain
// 400: no agent is chosen yet, so there is no protocol to shape it in).
//
// The path (as sent, before '?', percent-encoding intact) is canonical when
// it follows RFC 3986 §6.2.2 and merges no slashes:
//
//   - no percent-encoded unreserved character (ALPHA, DIGIT, '-', '.', '_',
//     '~'; §6.2.2.2): "/%6Byc" is "/kyc" to writ and not to Envoy;
//   - no encoded slash or backslash (%2F, %5C) and no raw backslash: routers
//     disagree on whether they separate segments;
//   - no "." or ".." segment (§6.2.2.3), encoded ones included (%2E is
//     unreserved): "/kyc/../" reaches the agent at "/" after normalisation;
//   - no empty segment ("//"), which Envoy's merge_slashes removes;
//   - well-formed percent-encoding (two hex digits; either case is accepted,
//     since it decodes to the same byte and routes hold no '%').
//
// The authority is canonical when its host is lower-case (§6.2.2.1) with no
// trailing dot, and its port, if any, is digits. It is checked only where it
// routes: some agent lists hosts, and no platform named the agent. The port
// is not part of the match (agents[].hosts name no port); Envoy's domains
// must list "host:*" beside "host" (or set ignore_port_in_host_matching).
//
// Envoy's own normalisation (normalize_path, merge_slashes,
// path_with_escaped_slashes_action: REJECT_REQUEST, strip_trailing_host_dot,
// as deploy/envoy sets them) leaves only canonical targets, so there nothing
// a client sends in good faith is refused.
//
// It is a package of its own, beside the core that refuses what it finds,
// so that its fuzz target builds without the policy engine.
package canonical

import (
	"net"
	"strings"
)

// Path says why raw, a request path as sent, is not canonical; "" when it
// is.
func Path(raw string) string {
	if raw == "" || raw[0] != '/' {
		return "the path does not start with /"
	}
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '%':
			if i+2 >= len(raw) || unhex(raw[i+1]) < 0 || unhex(raw[i+2]) < 0 {
				return "malformed percent-encoding"
			}
			switch b := byte(unhex(raw[i+1])<<4 | unhex(raw[i+2])); {
			case b == '/' || b == '\\':
				return "an encoded slash"
			case unreserved(b):
				return "a percent-encoded unreserved character"
			}
			i += 2
		case '\\':
			return "a backslash"
		}
	}
	segs := strings.Split(raw[1:], "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return "a dot segment"
		case seg == "" && i < len(segs)-1:
			return "an empty segment (//)"
		}
	}
	return ""
}

// Host says why a Host header or :authority is not canonical; "" when it
// is.
func Host(hostport string) string {
	host := hostport
	if h, port, err := net.SplitHostPort(hostport); err == nil {
		host = h
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return "the port is not digits"
		}
	}
	switch {
	case strings.HasSuffix(host, "."):
		return "a trailing dot"
	case host != strings.ToLower(host):
		return "upper-case letters in the host"
	}
	return ""
}

// unreserved reports RFC 3986's unreserved characters.
func unreserved(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// unhex is the value of a hex digit, -1 for any other byte.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// Below reports whether a route's prefix covers path (the prefix itself,
// or the prefix and then '/'; "" covers every path), and the path below it.
func Below(prefix, path string) (string, bool) {
	if prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/") {
		rest := strings.TrimPrefix(path, prefix)
		if rest == "" {
			rest = "/"
		}
		return rest, true
	}
	return "", false
}
