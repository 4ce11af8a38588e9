package egress_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/writ-authz/writ/authz/exchange"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/proxy"
)

// BenchmarkEgressOverhead measures what egress adds to a call, against the
// ingress check of the same request in the same run: ingress_admit is Admit
// of an inbound SendMessage on writ A (identity from the token cache, the
// decision from its cache, the link recorded); egress_hit is Admit of the
// agent's call to a target (the link looked up, the decision), the exchange
// answered from the token cache and the token checked and put on;
// egress_miss the same with every exchange a round trip to writ sts on
// loopback (client cache off). Forwarding itself is the same executor on
// both sides and is left out. Ratios: egress_hit/ingress_admit,
// egress_miss/ingress_admit.
//
// It is measured in process (the core's Admit and the exchange client called
// directly, one goroutine): the cost of the decision and the token, not of
// the listener's HTTP hop nor of a target's card fetch (a card_url target's
// card is cached for limits.card_cache_ttl, so a call pays it once a TTL).
// The out-of-process figure, the agent's call through the egress listener
// over loopback, is not measured here: it belongs with the sidecar's in
// bench/ (issue 22's note); nothing is recorded from this benchmark yet.
func BenchmarkEgressOverhead(b *testing.B) {
	w := newWorld(b, worldOptions{})
	w.a.rec.drop.Store(true)
	tok := w.token(orchestrator)
	// The ingress loop records a link per request: its caller's share
	// evicts its oldest, so each egress run takes a fresh parent.
	var parent string
	ctx := context.Background()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"screen Acme"}]}}}`)
	ingress := func() proxy.Incoming {
		return proxy.Incoming{Mode: events.ModeSidecar, Method: "POST", Path: "/", RawPath: "/", Host: "127.0.0.1:8080",
			RemoteAddr: "127.0.0.1:5000", Body: body, Header: http.Header{"Content-Type": {"application/json"},
				"A2a-Version": {"1.0"}, "Authorization": {"Bearer " + tok}}}
	}
	egress := func() proxy.Incoming {
		return proxy.Incoming{Mode: events.ModeEgress, Method: "POST", Path: "/", RawPath: "/", Host: w.a.egress.Addr(),
			RemoteAddr: "127.0.0.1:5001", Route: "raw", Body: body, Header: http.Header{"Content-Type": {"application/json"},
				"A2a-Version": {"1.0"}}, Egress: &proxy.EgressCall{ParentID: parent, Base: "http://" + w.a.egress.Addr()}}
	}
	call := func(b *testing.B, exch *exchange.Exchanger) {
		out := w.a.core.Admit(ctx, egress())
		if out.Kind != proxy.Forward {
			b.Fatalf("egress outcome %v: %s", out.Kind, out.Answer.Body)
		}
		d := out.Plan.Delegation()
		t, err := exch.Exchange(ctx, exchange.Request{SubjectToken: d.SubjectToken, Audience: d.Audience, Scope: d.Scope})
		if err != nil {
			b.Fatal(err)
		}
		if refused, _ := out.Plan.Delegate(ctx, proxy.Delegated{Token: t.Value, ChainID: t.ChainID, Actors: t.Actors, Subject: t.Subject}); refused != nil {
			b.Fatalf("refused: %s", refused.Body)
		}
	}
	b.Run("ingress_admit", func(b *testing.B) {
		for b.Loop() {
			if out := w.a.core.Admit(ctx, ingress()); out.Kind != proxy.Forward {
				b.Fatalf("ingress outcome %v: %s", out.Kind, out.Answer.Body)
			}
		}
	})
	b.Run("egress_hit", func(b *testing.B) {
		parent = w.inbound(tok)
		call(b, w.a.exch) // the first exchange fills the cache
		b.ResetTimer()
		for b.Loop() {
			call(b, w.a.exch)
		}
	})
	b.Run("egress_miss", func(b *testing.B) {
		cfg := w.a.cfg.Egress.Exchange
		cfg.CacheBytes, cfg.CacheBytesPerSubject = -1, 0
		miss, err := exchange.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer miss.Close()
		parent = w.inbound(tok)
		for b.Loop() {
			call(b, miss)
		}
	})
}
