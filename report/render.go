package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options choose what Render puts on the page.
type Options struct {
	// Context, when set, adds the story of one context_id: its callers'
	// delegation chains, its tasks' states and every event in time order.
	Context string
	// Title heads the page; empty means "writ decision report".
	Title string
	// Chain, when set, adds the story of one delegation: every decision
	// carrying this chain id, ingress and egress on every hop, in order.
	Chain string
}

// TopN is how many callers and targets the page lists.
const TopN = 10

// The pages share their head (its Content-Security-Policy and the one
// stylesheet) from head.html.tmpl.
var (
	//go:embed head.html.tmpl
	headSource string
	//go:embed page.html.tmpl
	pageSource string
	//go:embed impact.html.tmpl
	impactSource string
)

var pageTemplate = template.Must(template.Must(template.New("page").Funcs(funcs).Parse(headSource)).Parse(pageSource))

var impactTemplate = template.Must(template.Must(template.New("impact").Funcs(funcs).Parse(headSource)).Parse(impactSource))

var funcs = template.FuncMap{
	"f1": func(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) },
	"ms": formatMS,
	"pct": func(n, of int) string {
		if of == 0 {
			return "0%"
		}
		return strconv.FormatFloat(math.Round(float64(n)*1000/float64(of))/10, 'f', -1, 64) + "%"
	},
}

// Render writes s as one self-contained HTML page: inline CSS and SVG only, no
// script and nothing fetched from anywhere (a Content-Security-Policy forbids it).
func Render(w io.Writer, s *Summary, opt Options) error {
	if s == nil {
		return fmt.Errorf("report: nil summary")
	}
	p := buildPage(s, opt)
	return pageTemplate.Execute(w, p)
}

type page struct {
	Title     string
	Span      string
	T         Totals
	Latency   Latency
	Revisions string
	Unknown   []CodeCount
	Time      *timeChart
	CodeChart *barChart
	Codes     []codeRow
	Callers   []partyRow
	MoreCall  int
	Targets   []partyRow
	MoreTarg  int
	Context   *contextView
	Contexts  []ContextSummary
	MoreCtx   int
	// The delegations: the one asked for, and the list to pick from.
	Delegation  *delegationView
	ChainAsked  string
	Delegations []DelegationSummary
	MoreDeleg   int
	Lost        Lost
	Logs        string
	Shadow      *shadowView
}

// maxContexts bounds the contexts the page lists.
const maxContexts = 50

type codeRow struct {
	CodeCount
	ID     string
	Routes string
}

type partyRow struct {
	Party
	ID  string
	Bar miniBar
}

// miniBar is a tiny stacked allow/deny bar drawn in a 120×10 box.
type miniBar struct{ Allow, Deny float64 }

func buildPage(s *Summary, opt Options) *page {
	ids := idSet{}
	p := &page{
		Title:     opt.Title,
		T:         s.Totals,
		Latency:   s.Latency,
		Revisions: strings.Join(s.Revisions, ", "),
	}
	if p.Title == "" {
		p.Title = "writ decision report"
	}
	if !s.First.IsZero() {
		p.Span = fmt.Sprintf("%s — %s UTC (%s)", s.First.Format("2006-01-02 15:04:05"),
			s.Last.Format("2006-01-02 15:04:05"), humanDuration(s.Last.Sub(s.First)))
	}
	for typ, n := range s.Unknown {
		if typ == "" {
			typ = "(no type)"
		}
		p.Unknown = append(p.Unknown, CodeCount{Code: typ, Count: n})
	}
	slices.SortFunc(p.Unknown, func(a, b CodeCount) int { return strings.Compare(a.Code, b.Code) })
	p.Time = buildTimeChart(s)
	if len(s.Codes) > 0 {
		var bars []barItem
		for _, c := range s.Codes {
			bars = append(bars, barItem{Label: c.Code, Value: c.Count})
		}
		p.CodeChart = buildBarChart(bars)
	}
	for _, c := range s.Codes {
		p.Codes = append(p.Codes, codeRow{CodeCount: c, ID: ids.make("code-" + c.Code), Routes: strings.Join(c.Routes, ", ")})
	}
	p.Callers, p.MoreCall = partyRows(s.Callers, "caller-", ids)
	p.Targets, p.MoreTarg = partyRows(s.Targets, "target-", ids)
	if opt.Context != "" {
		p.Context = buildContext(s, opt.Context)
	}
	p.Contexts = s.ContextList()
	if len(p.Contexts) > maxContexts {
		p.Contexts, p.MoreCtx = p.Contexts[:maxContexts], len(p.Contexts)-maxContexts
	}
	if opt.Chain != "" {
		p.ChainAsked = opt.Chain
		p.Delegation = buildDelegation(s.Delegation(opt.Chain))
	}
	p.Delegations = s.Delegations()
	if len(p.Delegations) > maxContexts {
		p.Delegations, p.MoreDeleg = p.Delegations[:maxContexts], len(p.Delegations)-maxContexts
	}
	p.Lost = s.Lost
	p.Shadow = buildShadow(&s.Shadow)
	if len(s.Logs) > 1 {
		p.Logs = strings.Join(s.Logs, ", ")
	}
	return p
}

// ---------------------------------------------------------------------------
// One delegation's story
// ---------------------------------------------------------------------------

type delegationView struct {
	ID, Initiator   string
	Hops            int
	Allowed, Denied int
	Span, Logs      string
	Steps           []stepView
}

type stepView struct {
	ID, Time, Offset string
	Kind, Label      string
	Direction        string
	Hop              int
	At, Operation    string
	Path             []pathHop
	Denials          []Denial
	Details          []string
}

type pathHop struct{ Name, Class string }

func buildDelegation(d *Delegation) *delegationView {
	if d == nil {
		return nil
	}
	v := &delegationView{ID: d.ChainID, Initiator: orDash(d.Initiator), Hops: d.Hops, Allowed: d.Allowed, Denied: d.Denied,
		Span: humanDuration(d.Last.Sub(d.First)), Logs: strings.Join(d.Logs, ", ")}
	for i, st := range d.Steps {
		sv := stepView{ID: "step-" + strconv.Itoa(i+1), Time: st.Time.Format("15:04:05.000"), Offset: "+" + formatOffset(st.Time.Sub(d.First)),
			Kind: "deny", Label: "DENY", Direction: st.Direction, Hop: st.Hop, At: orDash(st.At), Operation: orDash(st.Operation),
			Denials: st.Denials}
		if st.Allow {
			sv.Kind, sv.Label = "allow", "ALLOW"
		}
		if st.DryRun {
			sv.Label += " (dry run)"
		}
		for j, name := range st.Path {
			h := pathHop{Name: orDash(name)}
			switch {
			case j == len(st.Path)-1:
				h.Class = "target allowed"
				if !st.Allow {
					h.Class = "target denied"
				}
			case j == len(st.Path)-2:
				h.Class = "caller"
			case j == 0 && name == d.Initiator:
				h.Class = "user"
			}
			sv.Path = append(sv.Path, h)
		}
		after := ""
		if st.After > 0 {
			after = fmt.Sprintf("after step %d (%s)", st.After, map[string]string{JoinedParent: "its inbound decision", JoinedCall: "the call it decides"}[st.Joined])
		}
		sv.Details = nonEmpty("decision "+st.DecisionID, st.DecisionID, after, after, st.Where(), "y",
			"policy "+st.PolicyRevision, st.PolicyRevision, st.Mode, st.Mode)
		v.Steps = append(v.Steps, sv)
	}
	return v
}

func partyRows(ps []Party, prefix string, ids idSet) ([]partyRow, int) {
	most := 0
	for _, p := range ps {
		most = max(most, p.Total())
	}
	var rows []partyRow
	for i, p := range ps {
		if i == TopN {
			return rows, len(ps) - TopN
		}
		r := partyRow{Party: p, ID: ids.make(prefix + p.Name)}
		if most > 0 {
			r.Bar = miniBar{Allow: 120 * float64(p.Allowed) / float64(most), Deny: 120 * float64(p.Denied) / float64(most)}
		}
		rows = append(rows, r)
	}
	return rows, 0
}

// idSet makes element ids from free text: characters outside [A-Za-z0-9_.-]
// become '_', and a repeat gets a numeric suffix so that every id is unique.
type idSet map[string]bool

func (s idSet) make(text string) string {
	id := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '_'
	}, text)
	for n, base := 2, id; s[id]; n++ {
		id = base + "-" + strconv.Itoa(n)
	}
	s[id] = true
	return id
}

// ---------------------------------------------------------------------------
// Allow/deny over time
// ---------------------------------------------------------------------------

const (
	chartW, chartH         = 960.0, 260.0
	padL, padR, padT, padB = 48.0, 12.0, 14.0, 40.0
	maxBuckets             = 48
	barRowH                = 26.0
)

var bucketWidths = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// bucketWidth picks the smallest width on the ladder that covers first..last in
// at most maxBuckets aligned buckets (a coarser multiple of 28 days beyond it).
func bucketWidth(first, last time.Time) time.Duration {
	for _, w := range bucketWidths {
		if n := last.Truncate(w).Sub(first.Truncate(w))/w + 1; n <= maxBuckets {
			return w
		}
	}
	w := bucketWidths[len(bucketWidths)-1]
	return w * (last.Sub(first)/(w*maxBuckets) + 1)
}

type timeChart struct {
	W, H, Left, Right, Top, Bottom float64
	Width                          string // the bucket width, for people
	Bars                           []timeBar
	Ticks                          []tick
	Labels                         []xLabel
	Buckets                        int
}

type timeBar struct {
	X, W                   float64
	AllowY, AllowH         float64
	DenyY, DenyH           float64
	DryY, DryH             float64
	Allowed, Denied, DryRn int
	Title                  string
}

type tick struct {
	Y     float64
	Label string
}

type xLabel struct {
	X      float64
	Label  string
	Anchor string // SVG text-anchor: start, middle or end
}

func buildTimeChart(s *Summary) *timeChart {
	var first, last time.Time
	for _, e := range s.Events {
		if e.Type != TypeDecision {
			continue
		}
		if first.IsZero() || e.Time.Before(first) {
			first = e.Time
		}
		if e.Time.After(last) {
			last = e.Time
		}
	}
	if first.IsZero() {
		return nil
	}
	w := bucketWidth(first, last)
	start := first.Truncate(w)
	n := int(last.Truncate(w).Sub(start)/w) + 1
	type counts struct{ allow, deny, dry int }
	buckets := make([]counts, n)
	for _, e := range s.Events {
		if e.Type != TypeDecision {
			continue
		}
		b := &buckets[int(e.Time.Sub(start)/w)]
		switch {
		case e.Allow:
			b.allow++
		case e.DryRun:
			b.dry++
		default:
			b.deny++
		}
	}
	most := 0
	for _, b := range buckets {
		most = max(most, b.allow+b.deny+b.dry)
	}
	step := niceStep(float64(most) / 4)
	top := step * math.Ceil(float64(most)/step)
	c := &timeChart{W: chartW, H: chartH, Left: padL, Right: chartW - padR, Top: padT, Bottom: chartH - padB,
		Width: humanDuration(w), Buckets: n}
	plotH := c.Bottom - c.Top
	slot := (c.Right - c.Left) / float64(n)
	gap := math.Min(slot*0.2, 6)
	y := func(v int) float64 { return plotH * float64(v) / top }
	layout := labelLayout(w)
	for i, b := range buckets {
		t0 := start.Add(time.Duration(i) * w)
		bar := timeBar{X: c.Left + float64(i)*slot + gap/2, W: slot - gap, Allowed: b.allow, Denied: b.deny, DryRn: b.dry}
		bar.AllowH = y(b.allow)
		bar.AllowY = c.Bottom - bar.AllowH
		bar.DryH = y(b.dry)
		bar.DryY = bar.AllowY - bar.DryH
		bar.DenyH = y(b.deny)
		bar.DenyY = bar.DryY - bar.DenyH
		bar.Title = fmt.Sprintf("%s – %s UTC: %d allowed, %d denied", t0.Format(layout), t0.Add(w).Format(layout), b.allow, b.deny+b.dry)
		if b.dry > 0 {
			bar.Title += fmt.Sprintf(" (%d of them in dry run)", b.dry)
		}
		c.Bars = append(c.Bars, bar)
	}
	for v := 0.0; v <= top+step/2; v += step {
		c.Ticks = append(c.Ticks, tick{Y: c.Bottom - plotH*v/top, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	every := max(1, int(math.Ceil(float64(n)/8)))
	for i := 0; i < n; i += every {
		t0 := start.Add(time.Duration(i) * w)
		if x := c.Left + float64(i)*slot; i > 0 && x > c.Right-7*float64(len(t0.Format(layout))) {
			break // it would run off the chart
		}
		c.Labels = append(c.Labels, xLabel{X: c.Left + float64(i)*slot, Label: t0.Format(layout), Anchor: "start"})
	}
	return c
}

func labelLayout(w time.Duration) string {
	switch {
	case w < time.Minute:
		return "15:04:05"
	case w < 24*time.Hour:
		return "Jan 02 15:04"
	}
	return "2006-01-02"
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten, at least 1.
func niceStep(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// ---------------------------------------------------------------------------
// Horizontal bars (denials by code)
// ---------------------------------------------------------------------------

type barItem struct {
	Label string
	Value int
}

type barChart struct {
	W, H, LabelW float64
	Rows         []barRow
}

type barRow struct {
	Y, TextY, W, ValueX float64
	Label               string
	Value               int
}

func buildBarChart(items []barItem) *barChart {
	longest := 0
	most := 0
	for _, it := range items {
		longest = max(longest, len([]rune(it.Label)))
		most = max(most, it.Value)
	}
	c := &barChart{W: chartW, LabelW: math.Min(16+7.4*float64(longest), 360)}
	room := c.W - c.LabelW - 60
	for i, it := range items {
		r := barRow{Y: float64(i)*barRowH + 4, Label: it.Label, Value: it.Value}
		r.TextY = r.Y + barRowH/2 + 1
		if most > 0 {
			r.W = math.Max(2, room*float64(it.Value)/float64(most))
		}
		r.ValueX = c.LabelW + r.W + 6
		c.Rows = append(c.Rows, r)
	}
	c.H = float64(len(items))*barRowH + 8
	return c
}

// ---------------------------------------------------------------------------
// One context's story
// ---------------------------------------------------------------------------

type contextView struct {
	ID        string
	Events    []timelineItem
	Decisions int
	Tasks     int
	Span      string
	Chains    []chainView
	Lanes     *laneChart
}

type timelineItem struct {
	Time, Offset string
	Kind, Label  string
	Text         string
	Denials      []Denial
	Details      []string
	Line         int
}

type chainView struct {
	User, Tenant     string
	Hops             []string // earlier actors, outermost first
	Caller, Target   string
	Allowed, Denied  int
	Codes            string
	Method, Issuer   string
	Unauthenticated  bool
	DecisionsSummary string
}

func buildContext(s *Summary, id string) *contextView {
	evs := s.Context(id)
	v := &contextView{ID: id}
	if len(evs) == 0 {
		return v
	}
	t0 := evs[0].Time
	v.Span = humanDuration(evs[len(evs)-1].Time.Sub(t0))
	tasks := map[string]bool{}
	chains := map[string]*chainView{}
	var order []string
	for i := range evs {
		e := &evs[i]
		if e.TaskID != "" {
			tasks[e.TaskID] = true
		}
		v.Events = append(v.Events, timelineEntry(e, t0))
		if e.Type != TypeDecision {
			continue
		}
		v.Decisions++
		c := chainView{Target: e.Route, Caller: CallerName(e), Unauthenticated: e.Caller == nil || !e.Caller.Authenticated}
		if e.Caller != nil {
			c.User, c.Tenant, c.Hops = e.Caller.UserID, e.Caller.Tenant, e.Caller.Chain
			c.Method, c.Issuer = e.Caller.Method, e.Caller.Issuer
		}
		key := strings.Join(append([]string{c.User, c.Tenant, c.Caller, c.Target, c.Method, c.Issuer}, c.Hops...), "\x00")
		have := chains[key]
		if have == nil {
			have = &c
			chains[key] = have
			order = append(order, key)
		}
		if e.Allow {
			have.Allowed++
		} else {
			have.Denied++
		}
		for _, code := range e.Codes() {
			if !strings.Contains(", "+have.Codes+", ", ", "+code+", ") {
				if have.Codes != "" {
					have.Codes += ", "
				}
				have.Codes += code
			}
		}
	}
	for _, k := range order {
		c := chains[k]
		var parts []string
		if c.Allowed > 0 {
			parts = append(parts, fmt.Sprintf("%d allowed", c.Allowed))
		}
		if c.Denied > 0 {
			parts = append(parts, fmt.Sprintf("%d denied", c.Denied))
		}
		c.DecisionsSummary = strings.Join(parts, ", ")
		v.Chains = append(v.Chains, *c)
	}
	v.Tasks = len(tasks)
	v.Lanes = buildLanes(evs)
	return v
}

func timelineEntry(e *Event, t0 time.Time) timelineItem {
	it := timelineItem{Time: e.Time.Format("15:04:05.000"), Offset: "+" + formatOffset(e.Time.Sub(t0)), Line: e.LineNo}
	switch e.Type {
	case TypeDecision:
		it.Kind, it.Label = "deny", "DENY"
		if e.Allow {
			it.Kind, it.Label = "allow", "ALLOW"
		}
		if e.DryRun {
			it.Label += " (dry run)"
		}
		op := e.Operation
		if op == "" {
			op = "request"
		}
		it.Text = fmt.Sprintf("%s → %s: %s", CallerName(e), orDash(e.Route), op)
		it.Denials = e.Denials
		it.Details = nonEmpty("decision "+e.DecisionID, e.DecisionID,
			"policy "+e.PolicyRevision, e.PolicyRevision,
			"latency "+formatMS(e.LatencyMS), ifs(e.LatencyMS > 0),
			"eval "+formatMS(e.EvalMS), ifs(e.EvalMS > 0),
			"cache hit", ifs(e.CacheHit),
			"task "+e.TaskID, e.TaskID,
			e.Mode, e.Mode, e.Protocol, e.Protocol)
	case TypeTaskCreated:
		it.Kind, it.Label = "task", "TASK CREATED"
		it.Text = "task " + orDash(e.TaskID)
		if e.Route != "" {
			it.Text += " at " + e.Route
		}
		if e.To != "" {
			it.Text += ", " + e.To
		}
	case TypeTaskStateChanged:
		it.Kind, it.Label = "task", "STATE"
		it.Text = fmt.Sprintf("task %s: %s → %s", orDash(e.TaskID), orDash(e.From), orDash(e.To))
	case TypeTaskArtifact:
		it.Kind, it.Label = "artifact", "ARTIFACT"
		it.Text = fmt.Sprintf("task %s produced %q", orDash(e.TaskID), e.Artifact)
	case TypeProtocolViolation:
		it.Kind, it.Label = "deny", "PROTOCOL VIOLATION"
		it.Text = "task " + orDash(e.TaskID)
	case TypeUpstreamError:
		// The agent refused a request writ allowed: its own error, passed on.
		it.Kind, it.Label = "deny", "AGENT ERROR"
		it.Text = orDash(e.Route) + " answered with an error"
		if u := e.UpstreamError; u != nil {
			it.Text = fmt.Sprintf("%s answered %d %s", orDash(e.Route), u.Code, u.Kind)
			it.Details = nonEmpty(u.Message, u.Message, "decision "+e.DecisionID, e.DecisionID, "task "+e.TaskID, e.TaskID)
		}
	case TypePushAttempt, TypePushDelivered, TypePushFailed:
		it.Kind, it.Label = "push", "PUSH ATTEMPT"
		if e.Type == TypePushDelivered {
			it.Kind, it.Label = "allow", "PUSH DELIVERED"
		} else if e.Type == TypePushFailed {
			it.Kind, it.Label = "deny", "PUSH FAILED"
		}
		it.Text = "task " + orDash(e.TaskID)
		if p := e.Push; p != nil {
			it.Text += " to " + orDash(p.Host)
			it.Details = nonEmpty("attempt "+strconv.Itoa(p.Attempt), ifs(p.Attempt > 0),
				"status "+strconv.Itoa(p.Status), ifs(p.Status > 0), p.Reason, p.Reason)
		}
	}
	if e.Error != "" {
		it.Details = append(it.Details, "error: "+e.Error)
	}
	return it
}

// nonEmpty takes (text, condition) pairs and keeps each text whose condition is non-empty.
func nonEmpty(pairs ...string) []string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			out = append(out, pairs[i])
		}
	}
	return out
}

func ifs(b bool) string {
	if b {
		return "y"
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// laneChart draws a context over time: a lane of its decisions, then one lane
// per task with the task's states as segments and its artifacts and pushes as marks.
type laneChart struct {
	W, H, Left, Right, AxisY float64
	Lanes                    []lane
	Axis                     []xLabel
}

type lane struct {
	Y, TextY, MidY float64
	MarkY          float64 // marks sit on the mid line, or on the top edge of state segments
	Label          string
	Segments       []segment
	Marks          []laneMark
}

type segment struct {
	X, W, TextX float64
	State       string
	Class       string
	ShowText    bool
	Title       string
}

type laneMark struct {
	X     float64
	Class string
	Title string
}

const laneH, laneGap, laneLabelW = 26.0, 12.0, 170.0

func buildLanes(evs []Event) *laneChart {
	var tasks []string
	for _, e := range evs {
		if e.TaskID != "" && !slices.Contains(tasks, e.TaskID) && e.Type != TypeDecision {
			tasks = append(tasks, e.TaskID)
		}
	}
	t0, t1 := evs[0].Time, evs[len(evs)-1].Time
	span := t1.Sub(t0)
	if span <= 0 {
		span = time.Millisecond
	}
	c := &laneChart{W: chartW, Left: laneLabelW, Right: chartW - 20}
	x := func(t time.Time) float64 {
		return c.Left + (c.Right-c.Left)*float64(t.Sub(t0))/float64(span)
	}
	newLane := func(label string) lane { // the next lane down
		y := float64(len(c.Lanes))*(laneH+laneGap) + 8
		return lane{Y: y, TextY: y + laneH/2 + 4, MidY: y + laneH/2, MarkY: y + laneH/2, Label: label}
	}
	at := func(t time.Time) string { return t.Format("15:04:05.000") }

	decisions := newLane("decisions")
	for _, e := range evs {
		if e.Type != TypeDecision {
			continue
		}
		m := laneMark{X: x(e.Time), Class: "allow", Title: fmt.Sprintf("%s ALLOW %s → %s: %s", at(e.Time), CallerName(&e), e.Route, e.Operation)}
		if !e.Allow {
			m.Class = "deny"
			m.Title = fmt.Sprintf("%s DENY %s → %s: %s %s", at(e.Time), CallerName(&e), e.Route, e.Operation, strings.Join(e.Codes(), ", "))
		}
		decisions.Marks = append(decisions.Marks, m)
	}
	if len(decisions.Marks) > 0 {
		c.Lanes = append(c.Lanes, decisions)
	}

	for _, id := range tasks {
		l := newLane(id)
		l.MarkY = l.Y
		var state string
		var since time.Time
		closeSeg := func(until time.Time) {
			if state == "" {
				return
			}
			s := segment{X: x(since), State: state, Class: stateClass(state)}
			s.W = math.Max(x(until)-s.X, 3)
			s.TextX = s.X + 5
			s.ShowText = s.W > 7*float64(len(state))+10
			s.Title = fmt.Sprintf("%s: %s from %s for %s", id, state, at(since), humanDuration(until.Sub(since)))
			l.Segments = append(l.Segments, s)
		}
		for _, e := range evs {
			if e.TaskID != id {
				continue
			}
			switch e.Type {
			case TypeTaskCreated:
				if state == "" {
					state, since = "created", e.Time
					if e.To != "" {
						state = e.To
					}
				}
			case TypeTaskStateChanged:
				if state == "created" && e.From != "" {
					state = e.From // the log names the state the task was created in
				}
				closeSeg(e.Time)
				state, since = e.To, e.Time
				if state == "" {
					state = "unknown"
				}
			case TypeTaskArtifact:
				l.Marks = append(l.Marks, laneMark{X: x(e.Time), Class: "artifact",
					Title: fmt.Sprintf("%s artifact %q", at(e.Time), e.Artifact)})
			case TypePushDelivered, TypePushFailed, TypePushAttempt:
				cls := map[string]string{TypePushDelivered: "allow", TypePushFailed: "deny", TypePushAttempt: "push"}[e.Type]
				l.Marks = append(l.Marks, laneMark{X: x(e.Time), Class: cls,
					Title: fmt.Sprintf("%s %s", at(e.Time), strings.ReplaceAll(e.Type, "_", " "))})
			case TypeProtocolViolation:
				l.Marks = append(l.Marks, laneMark{X: x(e.Time), Class: "deny", Title: at(e.Time) + " protocol violation"})
			}
		}
		closeSeg(t1) // the last state holds to the end of the story
		c.Lanes = append(c.Lanes, l)
	}
	if len(c.Lanes) == 0 {
		return nil
	}
	c.H = float64(len(c.Lanes))*(laneH+laneGap) + 30
	c.AxisY = c.H - 8
	for i := 0; i <= 4; i++ {
		t := t0.Add(span * time.Duration(i) / 4)
		anchor := map[int]string{0: "start", 4: "end"}[i]
		if anchor == "" {
			anchor = "middle"
		}
		c.Axis = append(c.Axis, xLabel{X: x(t), Label: "+" + formatOffset(t.Sub(t0)), Anchor: anchor})
	}
	return c
}

func stateClass(state string) string {
	switch state {
	case "succeeded", "completed":
		return "st-ok"
	case "failed", "rejected":
		return "st-bad"
	case "cancelled", "canceled":
		return "st-cancel"
	case "running", "working":
		return "st-run"
	case "awaiting_input", "awaiting_auth", "input-required", "auth-required":
		return "st-wait"
	}
	return "st-other"
}

// ---------------------------------------------------------------------------
// Formatting
// ---------------------------------------------------------------------------

func formatMS(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(v/1000, 'f', 2, 64) + " s"
}

func formatOffset(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return humanDuration(d)
}

// humanDuration prints a duration to a sensible precision: 850ms, 12.3s, 4m05s, 3h20m, 2d4h.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(math.Round(d.Seconds()*10)/10, 'f', -1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	days := int(d.Hours()) / 24
	return fmt.Sprintf("%dd%dh", days, int(d.Hours())%24)
}

// Write writes what `writ report` asks of s: with text, the story of
// opt.Chain as text (without a chain, the list of delegations); else the
// page (Render). A context or chain that no line of the logs names is an
// error, and nothing is written.
func Write(w io.Writer, s *Summary, opt Options, text bool) error {
	names := strings.Join(s.Logs, ", ")
	if opt.Context != "" && len(s.Context(opt.Context)) == 0 {
		return fmt.Errorf("%s: no event has context_id %q", names, opt.Context)
	}
	if opt.Chain != "" && s.Delegation(opt.Chain) == nil {
		return fmt.Errorf("%s: no decision has chain_id %q", names, opt.Chain)
	}
	switch {
	case text && opt.Chain != "":
		return WriteStory(w, s.Delegation(opt.Chain))
	case text:
		return WriteDelegations(w, s.Delegations())
	}
	return Render(w, s, opt)
}
