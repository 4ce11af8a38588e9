package events

import "testing"

type counting struct {
	Nop
	n int
}

func (c *counting) Exchanged(Exchange) { c.n++ }

// plain is a Sink that does not take exchange events.
type plain struct{}

func (plain) Decided(Decision) {}
func (plain) Served(Request)   {}
func (plain) TaskChanged(Task) {}
func (plain) Pushed(Push)      {}

// TestBusExchanged: exchange events reach the subscribed sinks that take
// them, and a sink that does not is left alone.
func TestBusExchanged(t *testing.T) {
	var b Bus
	c := &counting{}
	b.Subscribe(plain{})
	b.Subscribe(c)
	b.Exchanged(Exchange{Outcome: ExchangeIssued})
	b.Exchanged(Exchange{Outcome: ExchangeFailed, Error: "timeout"})
	if c.n != 2 {
		t.Fatalf("the exchange sink got %d events, want 2", c.n)
	}
	var empty Bus
	empty.Exchanged(Exchange{}) // no sinks: nothing to do, no panic
}
