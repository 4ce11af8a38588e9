package link

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/authz/identity"
)

const secret = "eyJhbGciOiJFUzI1NiJ9.the-inbound-token.sig"

func caller(agent string) identity.Caller {
	return identity.Caller{Authenticated: true, Method: identity.MethodJWT, Issuer: "https://idp", AgentID: agent,
		UserID: "u-1", Tenant: "t1", Scopes: []string{"delegate"}}
}

func TestPutGet(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tab := NewTable(1<<20, 1<<18, time.Hour).WithClock(func() time.Time { return now })
	if !tab.Put(New(Link{DecisionID: "d1", Agent: "a", Caller: caller("x"), TaskID: "t"}, secret)) {
		t.Fatal("not kept")
	}
	l, ok := tab.Get("d1")
	if !ok || l.Token() != secret || l.Agent != "a" || l.TaskID != "t" || !l.Expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("got %v %v", l, ok)
	}
	if _, ok := tab.Get("d2"); ok {
		t.Fatal("an unknown id was found")
	}
}

// TestExpiry: a link lives until the inbound token's exp or the TTL,
// whichever is first.
// Threat: a link outliving the inbound token lets the agent act with an
// authority its caller no longer has. Defence: the link expires with the
// token (or the TTL, when sooner) and is then not found.
func TestExpiry(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tab := NewTable(1<<20, 1<<18, time.Hour).WithClock(func() time.Time { return now })
	tab.Put(New(Link{DecisionID: "short", Caller: caller("x"), Expires: now.Add(time.Minute)}, secret))
	tab.Put(New(Link{DecisionID: "long", Caller: caller("x"), Expires: now.Add(48 * time.Hour)}, secret))
	if tab.Put(New(Link{DecisionID: "dead", Caller: caller("x"), Expires: now.Add(-time.Second)}, secret)) {
		t.Fatal("a link of an expired token was kept")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := tab.Get("short"); ok {
		t.Fatal("a link outlived its token")
	}
	if _, ok := tab.Get("long"); !ok {
		t.Fatal("the long link is gone early")
	}
	now = now.Add(time.Hour)
	if _, ok := tab.Get("long"); ok {
		t.Fatal("a link outlived the TTL")
	}
	if s := tab.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("expired links still held: %+v", s)
	}
}

// TestFairEviction: a caller over its share evicts its own oldest links.
// Threat: one caller floods the agent with requests so that every other
// caller's link is evicted and their agent's outbound calls fail. Defence:
// each caller's links are bounded by a share of the table; its flood evicts
// only its own.
func TestFairEviction(t *testing.T) {
	tab := NewTable(64<<10, 8<<10, time.Hour)
	tab.Put(New(Link{DecisionID: "victim", Caller: caller("victim")}, secret))
	for i := range 1000 {
		tab.Put(New(Link{DecisionID: fmt.Sprintf("flood-%d", i), Caller: caller("flooder")}, secret))
	}
	if _, ok := tab.Get("victim"); !ok {
		t.Fatal("the flood evicted another caller's link")
	}
	if _, ok := tab.Get("flood-999"); !ok {
		t.Fatal("the flooder's newest link is gone")
	}
	if _, ok := tab.Get("flood-0"); ok {
		t.Fatal("the flooder kept more than its share")
	}
	s := tab.Stats()
	if s.Bytes > 64<<10 || s.Evicted == 0 {
		t.Fatalf("stats %+v", s)
	}
	// Many callers fill the table: the oldest links go, the total stays bounded.
	for i := range 1000 {
		tab.Put(New(Link{DecisionID: fmt.Sprintf("many-%d", i), Caller: caller(fmt.Sprintf("c%d", i))}, secret))
	}
	if s := tab.Stats(); s.Bytes > 64<<10 {
		t.Fatalf("over the bound: %+v", s)
	}
	if _, ok := tab.Get("many-999"); !ok {
		t.Fatal("the newest link is gone")
	}
}

// TestTokenNeverPrinted: a link formatted or logged never shows its token.
// Threat: the inbound bearer token, kept to be exchanged, leaks into writ's
// log and can be replayed. Defence: Link prints and logs without it.
func TestTokenNeverPrinted(t *testing.T) {
	l := New(Link{DecisionID: "d", Agent: "a", Caller: caller("x")}, secret)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("link", "link", l)
	for _, s := range []string{fmt.Sprint(l), fmt.Sprintf("%v %+v %#v %s", l, l, l, l), buf.String()} {
		if strings.Contains(s, "the-inbound-token") {
			t.Fatalf("the token was printed: %s", s)
		}
	}
}
