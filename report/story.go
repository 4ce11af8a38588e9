package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/writ-authz/writ/events"
)

// Delegation is one delegation across the logs of several writs: every
// decision carrying its chain id, ingress and egress on every hop, in the
// order the delegation ran.
type Delegation struct {
	ChainID string
	// Initiator is the chain's first principal, as its decisions name it.
	Initiator string
	// Steps are the decisions in order: each after the one it descends from
	// (an egress decision after its parent_decision_id, an ingress decision
	// after the egress decision that made its call), then by time.
	Steps           []Step
	Hops            int // the highest Hop of its steps
	Allowed, Denied int
	First, Last     time.Time
	// Logs names the logs its decisions were read from, in order.
	Logs []string
}

// Step is one decision of a delegation.
type Step struct {
	Event
	// Direction is events.DirectionIngress or events.DirectionEgress.
	Direction string
	// Hop numbers the call the decision is about: the agents it has passed
	// through, its caller included (1: a call from the first agent).
	Hop int
	// At is the agent whose writ decided; From and To the call's caller and
	// the agent called.
	At, From, To string
	// Path is the delegation up to this call: the initiator, the agents it
	// passed through, the agent called.
	Path []string
	// After is the number (1-based) of the step this one descends from, 0
	// for none; Joined says how the two were joined.
	After  int
	Joined string
}

// How a step was joined to the one before it, as Step.Joined.
const (
	JoinedParent = "parent_decision_id" // an egress decision's inbound decision
	JoinedCall   = "call"               // an ingress decision's call: the egress decision with its caller's chain and target
)

// DelegationSummary is one chain id of the logs: what a reader picks to see
// its story (writ report -chain ID).
type DelegationSummary struct {
	ChainID         string
	Initiator       string
	Decisions       int
	Allowed, Denied int
	Hops            int
	First, Last     time.Time
}

// direction is a decision's direction, "" read as ingress.
func direction(e *Event) string {
	if e.Direction == events.DirectionEgress {
		return events.DirectionEgress
	}
	return events.DirectionIngress
}

// path is the delegation a decision is about: the initiator, the agents it
// passed through (the caller last) and the agent called.
func path(e *Event) []string {
	var p []string
	if direction(e) == events.DirectionEgress {
		if e.Initiator != "" {
			p = append(p, e.Initiator)
		}
		p = append(p, e.Intermediaries...)
		return append(p, e.Target)
	}
	if c := e.Caller; c != nil {
		if c.UserID != "" {
			p = append(p, c.UserID)
		}
		p = append(p, c.Chain...)
		p = append(p, CallerName(e))
	} else {
		p = append(p, CallerName(e))
	}
	return append(p, e.Route)
}

// hop is the number of agents a decision's call has passed through, its
// caller included: 1 for a call from the delegation's first agent.
func hop(e *Event) int {
	if direction(e) == events.DirectionEgress {
		return len(e.Intermediaries)
	}
	if e.Caller == nil {
		return 1
	}
	return len(e.Caller.Chain) + 1
}

// Delegation returns the story of one chain id, nil when no decision of
// the logs carries it.
func (s *Summary) Delegation(chainID string) *Delegation {
	if chainID == "" {
		return nil
	}
	byChain, _ := s.chains()
	return delegationOf(chainID, byChain[chainID])
}

// chains groups the logs' decisions by chain id, each chain in log order:
// the decisions carrying it, then the inbound decisions its egress
// decisions descend from that carry no chain id. Those are a delegation's
// first hop when the token it started with had none (a token from the
// identity provider, not yet exchanged: the STS mints the chain id at the
// first exchange); without them the story would begin at the first agent's
// call instead of at the request that caused it. ids lists the chain ids in
// the order they first appear. A root that several chains descend from (its
// agent called two targets, each exchange minting a chain id) is in each.
func (s *Summary) chains() (byChain map[string][]*Event, ids []string) {
	byChain = map[string][]*Event{}
	roots := map[string]*Event{} // decision id → an ingress decision without a chain id
	for i := range s.Events {
		e := &s.Events[i]
		switch {
		case e.Type != TypeDecision:
		case e.ChainID != "":
			if _, seen := byChain[e.ChainID]; !seen {
				ids = append(ids, e.ChainID)
			}
			byChain[e.ChainID] = append(byChain[e.ChainID], e)
		case direction(e) == events.DirectionIngress && e.DecisionID != "":
			if _, dup := roots[e.DecisionID]; !dup {
				roots[e.DecisionID] = e
			}
		}
	}
	for _, id := range ids {
		var added []*Event
		for _, e := range byChain[id] {
			r := roots[e.ParentDecisionID]
			if direction(e) == events.DirectionEgress && r != nil && !slices.Contains(added, r) {
				added = append(added, r)
			}
		}
		byChain[id] = append(added, byChain[id]...)
	}
	return byChain, ids
}

// delegationOf orders one chain's decisions into its story.
func delegationOf(chainID string, decs []*Event) *Delegation {
	if len(decs) == 0 {
		return nil
	}
	d := &Delegation{ChainID: chainID}
	parent, how := joinSteps(decs)
	children := map[int][]int{}
	var roots []int
	for i := range decs {
		if p := parent[i]; p >= 0 {
			children[p] = append(children[p], i)
		} else {
			roots = append(roots, i)
		}
	}
	byTime := func(a, b int) int {
		if c := decs[a].Time.Compare(decs[b].Time); c != 0 {
			return c
		}
		return a - b // log order among equal times
	}
	slices.SortStableFunc(roots, byTime)
	number := map[int]int{}
	var walk func(i int)
	walk = func(i int) {
		e := decs[i]
		st := Step{Event: *e, Direction: direction(e), Path: path(e), Joined: how[i]}
		st.Hop = hop(e)
		st.From, st.To = st.Path[len(st.Path)-2], st.Path[len(st.Path)-1]
		st.At = st.To
		if st.Direction == events.DirectionEgress {
			st.At = st.From
			if e.Route != "" {
				st.At = e.Route
			}
		}
		if p := parent[i]; p >= 0 {
			st.After = number[p]
		}
		d.Steps = append(d.Steps, st)
		number[i] = len(d.Steps)
		kids := children[i]
		slices.SortStableFunc(kids, byTime)
		for _, k := range kids {
			walk(k)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	for i := range d.Steps {
		st := &d.Steps[i]
		d.Hops = max(d.Hops, st.Hop)
		if st.Allow {
			d.Allowed++
		} else {
			d.Denied++
		}
		if d.First.IsZero() || st.Time.Before(d.First) {
			d.First = st.Time
		}
		if st.Time.After(d.Last) {
			d.Last = st.Time
		}
		if !slices.Contains(d.Logs, st.Log) {
			d.Logs = append(d.Logs, st.Log)
		}
		if d.Initiator == "" && len(st.Path) > 1 {
			d.Initiator = st.Path[0]
		}
	}
	return d
}

// joinSteps finds each decision's predecessor (-1: none). An egress
// decision descends from its parent_decision_id. An ingress decision
// descends from the egress decision that made its call: the one whose
// intermediaries are the ingress caller's chain and agent, whose initiator
// is its user and whose target is its route, of the same operation when
// there is one, the nearest in time (the writs' clocks need not agree, so a
// call may seem to arrive before it left).
func joinSteps(decs []*Event) ([]int, []string) {
	parent := make([]int, len(decs))
	how := make([]string, len(decs))
	byID := map[string]int{}
	for i, e := range decs {
		parent[i] = -1
		if e.DecisionID != "" {
			if _, dup := byID[e.DecisionID]; !dup {
				byID[e.DecisionID] = i
			}
		}
	}
	for i, e := range decs {
		if direction(e) == events.DirectionEgress {
			if p, ok := byID[e.ParentDecisionID]; ok && e.ParentDecisionID != "" && p != i {
				parent[i], how[i] = p, JoinedParent
			}
			continue
		}
		best := -1
		var bestGap time.Duration
		bestOp := false
		for j, c := range decs {
			if direction(c) != events.DirectionEgress || !callOf(c, e) {
				continue
			}
			gap := e.Time.Sub(c.Time)
			if gap < 0 {
				gap = -gap
			}
			// A call of the same operation first (an agent's client fetches
			// the card, then sends: two calls on one hop), then the nearest.
			sameOp := c.Operation == e.Operation
			if best < 0 || sameOp && !bestOp || sameOp == bestOp && gap < bestGap {
				best, bestGap, bestOp = j, gap, sameOp
			}
		}
		if best >= 0 {
			parent[i], how[i] = best, JoinedCall
		}
	}
	// Links can only make a cycle with forged or broken lines; cut it where
	// it closes, so that the story ends and tells every decision.
	for i := range decs {
		seen := map[int]bool{i: true}
		for q := i; parent[q] >= 0; q = parent[q] {
			if seen[parent[q]] {
				parent[q], how[q] = -1, ""
				break
			}
			seen[parent[q]] = true
		}
	}
	return parent, how
}

// callOf reports whether egress decision out is the call ingress decision
// in decided: the same hop of the same delegation.
func callOf(out, in *Event) bool {
	c := in.Caller
	if c == nil {
		return false
	}
	hop := append(slices.Clone(c.Chain), c.AgentID)
	if !slices.Equal(out.Intermediaries, hop) {
		return false
	}
	if out.Initiator != "" && c.UserID != "" && out.Initiator != c.UserID {
		return false
	}
	return out.Target == "" || in.Route == "" || out.Target == in.Route
}

// Delegations lists the chain ids of the logs, the most recent first.
func (s *Summary) Delegations() []DelegationSummary {
	byChain, ids := s.chains()
	out := make([]DelegationSummary, 0, len(ids))
	for _, id := range ids {
		d := delegationOf(id, byChain[id])
		out = append(out, DelegationSummary{ChainID: id, Initiator: d.Initiator, Decisions: len(d.Steps),
			Allowed: d.Allowed, Denied: d.Denied, Hops: d.Hops, First: d.First, Last: d.Last})
	}
	slices.SortStableFunc(out, func(a, b DelegationSummary) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.ChainID, b.ChainID)
	})
	return out
}

// WriteStory writes a delegation as text: a heading, then each step on two
// lines (when, direction, where decided, the verdict and codes; the path
// and the decision's place), its denials below it.
func WriteStory(w io.Writer, d *Delegation) error {
	ew := &errWriter{w: w}
	ew.printf("delegation %s: initiated by %s, %d hop(s), %d decision(s) (%d allowed, %d denied), %s – %s UTC, from %s\n",
		d.ChainID, orDash(d.Initiator), d.Hops, len(d.Steps), d.Allowed, d.Denied,
		d.First.Format("2006-01-02 15:04:05.000"), d.Last.Format("15:04:05.000"), strings.Join(d.Logs, ", "))
	for i, st := range d.Steps {
		verdict := "DENY"
		if st.Allow {
			verdict = "ALLOW"
		}
		if st.DryRun {
			verdict += " (dry run)"
		}
		codes := ""
		if c := st.Codes(); len(c) > 0 {
			codes = " " + strings.Join(c, ", ")
		}
		ew.printf("\n%2d. %s +%s  hop %d  %-7s at %s  %s %s%s\n", i+1, st.Time.Format("15:04:05.000"),
			formatOffset(st.Time.Sub(d.First)), st.Hop, st.Direction, orDash(st.At), verdict, orDash(st.Operation), codes)
		ew.printf("    %s\n", strings.Join(st.Path, " → "))
		ew.printf("    decision %s · %s%s\n", orDash(st.DecisionID), st.Where(), stepLink(st))
		for _, dn := range st.Denials {
			ew.printf("      %s: %s\n", dn.Code, dn.Reason)
		}
	}
	return ew.err
}

func stepLink(st Step) string {
	switch st.Joined {
	case JoinedParent:
		return fmt.Sprintf(" · after %d (its inbound decision)", st.After)
	case JoinedCall:
		return fmt.Sprintf(" · after %d (the call it decides)", st.After)
	}
	return ""
}

// WriteDelegations writes the list of delegations as text, one a line.
func WriteDelegations(w io.Writer, list []DelegationSummary) error {
	ew := &errWriter{w: w}
	if len(list) == 0 {
		ew.printf("no decision carries a chain id\n")
		return ew.err
	}
	for _, d := range list {
		ew.printf("%s  initiator %s  %d hop(s)  %d decision(s): %d allowed, %d denied  %s – %s UTC\n",
			d.ChainID, orDash(d.Initiator), d.Hops, d.Decisions, d.Allowed, d.Denied,
			d.First.Format("2006-01-02 15:04:05"), d.Last.Format("15:04:05"))
	}
	return ew.err
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
