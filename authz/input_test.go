package authz

import (
	"fmt"
	"testing"

	"github.com/writ-authz/writ/task"
)

// TestPushURLCache: a callback URL split from the cache is split as the first
// time, for many URLs sharing the cache's slots.
func TestPushURLCache(t *testing.T) {
	for round := range 2 {
		for i := range 1000 {
			u := fmt.Sprintf("https://Host-%d.Bank.ae:%d/cb", i, 1000+i)
			p := pushInput(&task.PushConfig{URL: u, Token: "t"})
			if p.Scheme != "https" || p.Host != fmt.Sprintf("host-%d.bank.ae", i) || p.Port != 1000+i ||
				p.URL != fmt.Sprintf("https://host-%d.bank.ae:%d", i, 1000+i) {
				t.Fatalf("round %d: %s split as %+v", round, u, p)
			}
		}
	}
	for _, c := range []struct {
		url, origin, scheme, host string
		port                      int
	}{{"http://a.example/x", "http://a.example", "http", "a.example", 80}, {"https://b.example", "https://b.example", "https", "b.example", 443},
		{"ftp://c.example", "ftp://c.example", "ftp", "c.example", 0}, {"::not a url", "", "", "", 0},
		{"https://u:p@[::1]:8443/p?q#f", "https://[::1]:8443", "https", "::1", 8443}} {
		for range 2 {
			if p := pushInput(&task.PushConfig{URL: c.url}); p.URL != c.origin || p.Scheme != c.scheme || p.Host != c.host || p.Port != c.port {
				t.Errorf("%s split as %+v", c.url, p)
			}
		}
	}
}
