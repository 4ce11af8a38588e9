// Package link keeps, while egress mode is on, what an outbound call of a
// protected agent needs from the inbound request it serves: for every request
// writ forwarded to the agent, keyed by the id of the decision that let it
// through (the Writ-Decision-Id the agent received, which it passes back as
// Writ-Parent on its own calls), the verified caller, the task it named, its
// classification and the caller's bearer token — the subject token of the
// RFC 8693 exchange that makes the outbound token. The token is held in
// memory only, never logged (a Link prints without it) and never persisted.
//
// The table is bounded in bytes, each entry lives until the inbound token
// expires or the configured TTL passes, whichever is first, and it is fair:
// one caller's links may take only its share, so a caller who floods the
// agent with requests evicts its own oldest links, not everyone's. It is a
// leaf of the admission core, which records and looks links up.
package link

import (
	"container/list"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/writ-authz/writ/authz/identity"
	"github.com/writ-authz/writ/task"
)

// Link is what writ knew of one forwarded inbound request.
type Link struct {
	// DecisionID is the id of the decision that forwarded the request.
	DecisionID string
	// Agent is the protected agent it was forwarded to (agents[].name).
	Agent string
	// Caller is the caller writ verified. Read-only (it may be shared with
	// identity's token cache).
	Caller identity.Caller
	// TaskID and ContextID are what the request named ("" for a new task).
	TaskID, ContextID string
	// Classification is the task's data classification as decided.
	Classification task.Level
	// Expires is when the link stops naming its request: the inbound
	// token's exp or the table's TTL, whichever is first.
	Expires time.Time

	token string
}

// New is a link for a forwarded request; token is the caller's bearer token
// ("" when the caller presented none, e.g. a client certificate).
func New(l Link, token string) Link {
	l.token = token
	return l
}

// Token is the inbound caller's bearer token: the subject token of the
// exchange. Never log it.
func (l Link) Token() string { return l.token }

// String prints the link without its token.
func (l Link) String() string {
	return fmt.Sprintf("link{decision %s, agent %s, caller %s, task %s, context %s, expires %s}",
		l.DecisionID, l.Agent, l.Caller.AgentID, l.TaskID, l.ContextID, l.Expires.UTC().Format(time.RFC3339))
}

// GoString prints the link without its token (%#v).
func (l Link) GoString() string { return l.String() }

// LogValue logs the link without its token.
func (l Link) LogValue() slog.Value {
	return slog.GroupValue(slog.String("decision_id", l.DecisionID), slog.String("agent", l.Agent),
		slog.String("caller_agent_id", l.Caller.AgentID), slog.String("task_id", l.TaskID),
		slog.String("context_id", l.ContextID))
}

var (
	_ fmt.Stringer   = Link{}
	_ fmt.GoStringer = Link{}
	_ slog.LogValuer = Link{}
)

// Stats are a table's counts and size.
type Stats struct {
	Entries, Bytes int
	// Added counts links recorded; Evicted those removed before they
	// expired, for room (a caller over its share, or the table full).
	Added, Evicted uint64
}

// Table holds links. Safe for concurrent use.
type Table struct {
	ttl                 time.Duration
	maxBytes, perCaller int
	now                 func() time.Time

	mu       sync.Mutex
	byID     map[string]*entry
	order    *list.List // every entry, oldest first
	byCaller map[string]*callerLinks
	bytes    int
	added    uint64
	evicted  uint64
}

type entry struct {
	link   Link
	caller string
	size   int
	all    *list.Element
	mine   *list.Element
}

type callerLinks struct {
	order *list.List // this caller's entries, oldest first
	bytes int
}

// NewTable is a table of at most maxBytes, perCaller of them for one caller,
// whose links live at most ttl.
func NewTable(maxBytes, perCaller int, ttl time.Duration) *Table {
	return &Table{ttl: ttl, maxBytes: maxBytes, perCaller: min(perCaller, maxBytes), now: time.Now,
		byID: map[string]*entry{}, order: list.New(), byCaller: map[string]*callerLinks{}}
}

// WithClock makes the table read the time from now (tests of expiry).
func (t *Table) WithClock(now func() time.Time) *Table {
	t.now = now
	return t
}

// entryOverhead is the cost of one entry beyond its strings: the entry, its
// list elements, its map slots.
const entryOverhead = 512

// sizeOf estimates the bytes a link holds. The caller's claims are counted
// as the token's length: they are its payload, decoded.
func sizeOf(l *Link) int {
	c := &l.Caller
	n := entryOverhead + 2*len(l.token) + len(l.DecisionID) + len(l.Agent) + len(l.TaskID) + len(l.ContextID) +
		len(c.Issuer) + len(c.AgentID) + len(c.UserID) + len(c.Tenant) + len(c.ChainID) + len(c.Classification)
	for _, s := range c.Scopes {
		n += len(s) + 16
	}
	for _, s := range c.Chain {
		n += len(s) + 16
	}
	for _, h := range c.Hops {
		n += 64 + len(h.AgentID) + len(h.Tenant) + len(h.Classification)
		for _, s := range h.Scopes {
			n += len(s) + 16
		}
	}
	return n
}

// callerKey is who a link's share is counted against: the inbound caller.
func callerKey(c *identity.Caller) string {
	return c.Issuer + "\x00" + c.AgentID + "\x00" + c.UserID + "\x00" + c.Tenant
}

// Put records l (New made it), living until its Expires (the inbound
// token's exp; zero: none) or the TTL, whichever is first. A link larger
// than a caller's share is not kept, and reported false.
func (t *Table) Put(l Link) bool {
	now := t.now()
	if exp := now.Add(t.ttl); l.Expires.IsZero() || l.Expires.After(exp) {
		l.Expires = exp
	}
	if !l.Expires.After(now) || l.DecisionID == "" {
		return false
	}
	size := sizeOf(&l)
	if size > t.perCaller {
		return false
	}
	key := callerKey(&l.Caller)
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.byID[l.DecisionID]; ok {
		t.remove(old)
	}
	mine := t.byCaller[key]
	if mine == nil {
		mine = &callerLinks{order: list.New()}
		t.byCaller[key] = mine
	}
	// This caller's oldest links go first, to keep it within its share;
	// then, for room in the table, the oldest links of all.
	for mine.bytes+size > t.perCaller {
		t.evict(mine.order.Front().Value.(*entry), now)
	}
	for t.bytes+size > t.maxBytes {
		t.evict(t.order.Front().Value.(*entry), now)
	}
	// Evicting its last link dropped this caller's list from the index.
	t.byCaller[key] = mine
	e := &entry{link: l, caller: key, size: size}
	e.all = t.order.PushBack(e)
	e.mine = mine.order.PushBack(e)
	mine.bytes += size
	t.bytes += size
	t.byID[l.DecisionID] = e
	t.added++
	return true
}

// Get returns the live link of a decision id. An expired link is removed
// and not found.
func (t *Table) Get(decisionID string) (Link, bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byID[decisionID]
	if !ok {
		return Link{}, false
	}
	if !e.link.Expires.After(now) {
		t.remove(e)
		return Link{}, false
	}
	return e.link, true
}

// evict removes e for room, counting it when it had not expired yet.
func (t *Table) evict(e *entry, now time.Time) {
	if e.link.Expires.After(now) {
		t.evicted++
	}
	t.remove(e)
}

// remove takes e out of every index.
func (t *Table) remove(e *entry) {
	t.order.Remove(e.all)
	mine := t.byCaller[e.caller]
	mine.order.Remove(e.mine)
	mine.bytes -= e.size
	if mine.order.Len() == 0 {
		delete(t.byCaller, e.caller)
	}
	t.bytes -= e.size
	delete(t.byID, e.link.DecisionID)
}

// Stats returns the table's counts and size.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Stats{Entries: len(t.byID), Bytes: t.bytes, Added: t.added, Evicted: t.evicted}
}
