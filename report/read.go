// Package report reads writ decision logs and renders them as one self-contained HTML page,
// and joins the logs of several writs into the story of one delegation.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/task"
)

// Event types of the decision log that the report understands.
const (
	TypeDecision           = decisionlog.TypeDecision
	TypeTaskCreated        = decisionlog.TypeTaskCreated
	TypeTaskStateChanged   = decisionlog.TypeTaskStateChanged
	TypeTaskArtifact       = decisionlog.TypeTaskArtifact
	TypeProtocolViolation  = decisionlog.TypeTaskProtocolViolation
	TypePushAttempt        = decisionlog.TypePushAttempt
	TypePushDelivered      = decisionlog.TypePushDelivered
	TypePushFailed         = decisionlog.TypePushFailed
	TypeUpstreamError      = decisionlog.TypeUpstreamError
	maxLine                = 16 << 20 // longest log line Read accepts
	unauthenticatedCaller  = "(unauthenticated)"
	unknownCallerAgentName = "(no agent id)"
)

var knownTypes = map[string]bool{
	TypeDecision: true, TypeTaskCreated: true, TypeTaskStateChanged: true, TypeTaskArtifact: true,
	TypeProtocolViolation: true, TypePushAttempt: true, TypePushDelivered: true, TypePushFailed: true,
	TypeUpstreamError: true,
}

// custodyTypes are the log's account of itself (decisionlog's custody
// lines): not events, and not unknown either. writ report -verify checks
// them; the page counts the lines they say were lost.
var custodyTypes = map[string]bool{
	decisionlog.TypeLogStarted: true, decisionlog.TypeLogContinued: true,
	decisionlog.TypeCheckpoint: true, decisionlog.TypeLinesLost: true,
}

// Event is one line of the decision log, in the schema package decisionlog
// writes, with the line it stood on.
type Event struct {
	decisionlog.Line
	// LineNo is the event's 1-based line number in the log.
	LineNo int
	// Log names the log the event was read from (a Source's Name).
	Log string `json:"-"`
}

// Where is the event's log and line, "decisions.log:12".
func (e *Event) Where() string {
	if e.Log == "" {
		return "line " + strconv.Itoa(e.LineNo)
	}
	return e.Log + ":" + strconv.Itoa(e.LineNo)
}

// Caller is a decision line's caller, as the decision log writes it.
type Caller = decisionlog.LineCaller

// Denial is one denial of a decision line.
type Denial = task.Denial

// Push is a push line's delivery, as the decision log writes it.
type Push = decisionlog.LinePush

// Summary is what Read makes of a decision log.
type Summary struct {
	// Events holds every event of a known type, in log order.
	Events []Event
	// Totals are the log's headline numbers.
	Totals Totals
	// First and Last are the times of the earliest and latest known event.
	First, Last time.Time
	// Codes counts denial codes over all decisions, most frequent first.
	Codes []CodeCount
	// Callers counts decisions by the caller's agent id, busiest first.
	Callers []Party
	// Targets counts decisions by route (target agent), busiest first.
	Targets []Party
	// Revisions lists the policy revisions seen, in order of first appearance.
	Revisions []string
	// Unknown counts skipped lines by their unknown type ("" when a line has none).
	Unknown map[string]int
	// Latency summarizes the decisions' whole-request latency in milliseconds.
	Latency Latency
	// Logs names the logs read, in order.
	Logs []string
	// Lost counts the lines the logs say they lost (lines_lost lines):
	// dropped because the buffer was full, or lost to failed writes.
	Lost Lost
	// Shadow is what the shadow_disagreement lines say (policies_shadow:).
	Shadow Shadow
}

// Lost counts lines a log says it lost.
type Lost struct{ Dropped, Failed uint64 }

// Totals are a log's headline counts.
type Totals struct {
	Events        int // events of a known type
	Decisions     int // decision events
	Allowed       int // decisions with allow true
	Denied        int // decisions with allow false (dry-run ones included)
	DryRun        int // decisions taken in dry-run mode
	Errors        int // events of any type carrying an error
	Tasks         int // distinct task ids in task_created events
	StateChanges  int // task_state_changed events
	Artifacts     int // task_artifact events
	Violations    int // task_protocol_violation events
	PushAttempts  int // push_attempt events
	PushDelivered int // push_delivered events
	PushFailed    int // push_failed events
	Contexts      int // distinct context ids
	UnknownLines  int // lines skipped for an unknown type
}

// CodeCount is how many decisions carried one denial code.
type CodeCount struct {
	Code   string
	Count  int
	Reason string   // the first reason seen with the code
	Routes []string // the routes it was seen on, in order of first appearance
}

// Party counts the decisions of one caller or target.
type Party struct {
	Name            string
	Allowed, Denied int
	DryRun, Errors  int
	LastSeen        time.Time
}

// Total is the party's number of decisions.
func (p Party) Total() int { return p.Allowed + p.Denied }

// Latency summarizes decision latencies in milliseconds.
type Latency struct {
	N             int
	P50, P95, Max float64
}

// Read parses a decision log: JSON lines, blank lines ignored. A line that is not
// a JSON object of the log's schema, or has no valid time, is an error naming its
// line number; a line of an unknown type is counted in Summary.Unknown and skipped.
func Read(r io.Reader) (*Summary, error) {
	return ReadLogs(Source{R: r})
}

// Source is one log to read: its name (for messages and the page) and its
// lines.
type Source struct {
	Name string
	R    io.Reader
}

// ReadFiles reads the decision logs at paths as ReadLogs reads them, each
// named by its path; "-" is stdin (named "stdin"), at most once.
func ReadFiles(paths []string, stdin io.Reader) (*Summary, error) {
	srcs := make([]Source, 0, len(paths))
	stdinUsed := false
	for _, p := range paths {
		if p == "-" {
			if stdinUsed {
				return nil, errors.New("stdin (-) named twice")
			}
			stdinUsed = true
			srcs = append(srcs, Source{Name: "stdin", R: stdin})
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		srcs = append(srcs, Source{Name: p, R: f})
	}
	return ReadLogs(srcs...)
}

// ReadLogs parses several decision logs (of one writ's rotated files, or of
// several writs) as Read parses one, into one Summary: events in the order
// of the sources, then of their lines. An error names the source and line.
func ReadLogs(sources ...Source) (*Summary, error) {
	s := &Summary{Unknown: map[string]int{}}
	for _, src := range sources {
		if err := s.read(src); err != nil {
			if src.Name != "" {
				return nil, fmt.Errorf("%s: %w", src.Name, err)
			}
			return nil, err
		}
		s.Logs = append(s.Logs, src.Name)
	}
	s.summarize()
	return s, nil
}

func (s *Summary) read(src Source) error {
	sc := bufio.NewScanner(src.R)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if b[0] != '{' {
			return fmt.Errorf("line %d: not a JSON object", line)
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return fmt.Errorf("line %d: %w", line, jsonError(err))
		}
		if custodyTypes[head.Type] {
			if head.Type == decisionlog.TypeLinesLost {
				var ln decisionlog.Line
				if err := json.Unmarshal(b, &ln); err != nil {
					return fmt.Errorf("line %d: %w", line, jsonError(err))
				}
				s.Lost.Dropped += ln.Dropped
				s.Lost.Failed += ln.Failed
			}
			continue
		}
		if head.Type == decisionlog.TypeShadowDisagreement {
			// Not an event of a request's story: the shadow's view of one.
			var ln decisionlog.Line
			if err := json.Unmarshal(b, &ln); err != nil {
				return fmt.Errorf("line %d: %w", line, jsonError(err))
			}
			s.Shadow.add(&ln, (&Event{LineNo: line, Log: src.Name}).Where())
			continue
		}
		if !knownTypes[head.Type] {
			s.Unknown[head.Type]++
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("line %d: %w", line, jsonError(err))
		}
		if e.Time.IsZero() {
			return fmt.Errorf("line %d: %s event without a time", line, e.Type)
		}
		// The page shows no policy input (decision_log.include_input);
		// keeping every line's would hold a copy of the log.
		e.Input = nil
		e.Time = e.Time.UTC()
		e.LineNo = line
		e.Log = src.Name
		s.Events = append(s.Events, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d: longer than %d bytes", line+1, maxLine)
		}
		return fmt.Errorf("line %d: %w", line+1, err)
	}
	return nil
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		// The line is decoded into Event, which embeds decisionlog.Line: name
		// the field as it is in the log.
		field := strings.TrimPrefix(te.Field, "Line.")
		return fmt.Errorf("field %q: JSON %s where %s belongs", field, te.Value, te.Type)
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("time %s is not RFC 3339", pe.Value)
	}
	return err
}

func (s *Summary) summarize() {
	t := &s.Totals
	codes := map[string]*CodeCount{}
	callers := map[string]*Party{}
	targets := map[string]*Party{}
	tasks := map[string]bool{}
	contexts := map[string]bool{}
	var lat []float64
	for _, n := range s.Unknown {
		t.UnknownLines += n
	}
	for i := range s.Events {
		e := &s.Events[i]
		t.Events++
		if s.First.IsZero() || e.Time.Before(s.First) {
			s.First = e.Time
		}
		if e.Time.After(s.Last) {
			s.Last = e.Time
		}
		if e.Error != "" {
			t.Errors++
		}
		if e.ContextID != "" {
			contexts[e.ContextID] = true
		}
		switch e.Type {
		case TypeDecision:
			t.Decisions++
			if e.Allow {
				t.Allowed++
			} else {
				t.Denied++
			}
			if e.DryRun {
				t.DryRun++
			}
			if e.LatencyMS > 0 {
				lat = append(lat, e.LatencyMS)
			}
			if e.PolicyRevision != "" && !slices.Contains(s.Revisions, e.PolicyRevision) {
				s.Revisions = append(s.Revisions, e.PolicyRevision)
			}
			count(callers, CallerName(e), e)
			route := e.Route
			if route == "" {
				route = "(no route)"
			}
			count(targets, route, e)
			seen := map[string]bool{}
			for _, d := range e.Denials {
				if d.Code == "" || seen[d.Code] {
					continue
				}
				seen[d.Code] = true
				c := codes[d.Code]
				if c == nil {
					c = &CodeCount{Code: d.Code, Reason: d.Reason}
					codes[d.Code] = c
				}
				c.Count++
				if c.Reason == "" {
					c.Reason = d.Reason
				}
				if e.Route != "" && !slices.Contains(c.Routes, e.Route) {
					c.Routes = append(c.Routes, e.Route)
				}
			}
		case TypeTaskCreated:
			if e.TaskID != "" {
				tasks[e.TaskID] = true
			}
		case TypeTaskStateChanged:
			t.StateChanges++
		case TypeTaskArtifact:
			t.Artifacts++
		case TypeProtocolViolation:
			t.Violations++
		case TypePushAttempt:
			t.PushAttempts++
		case TypePushDelivered:
			t.PushDelivered++
		case TypePushFailed:
			t.PushFailed++
		}
	}
	t.Tasks = len(tasks)
	t.Contexts = len(contexts)
	for _, c := range codes {
		s.Codes = append(s.Codes, *c)
	}
	slices.SortFunc(s.Codes, func(a, b CodeCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Code, b.Code)
	})
	s.Callers = ranked(callers)
	s.Targets = ranked(targets)
	s.Latency = latency(lat)
	s.Shadow.sort()
}

// CallerName is the name the report gives a decision's caller: its agent id,
// or a placeholder when the caller was not authenticated or named no agent.
func CallerName(e *Event) string { return CallerNameOf(e.Caller) }

// CallerNameOf is CallerName of a decision line's caller (nil: none).
func CallerNameOf(c *Caller) string {
	switch {
	case c == nil || !c.Authenticated && c.AgentID == "":
		return unauthenticatedCaller
	case c.AgentID == "":
		return unknownCallerAgentName
	}
	return c.AgentID
}

func count(m map[string]*Party, name string, e *Event) {
	p := m[name]
	if p == nil {
		p = &Party{Name: name}
		m[name] = p
	}
	if e.Allow {
		p.Allowed++
	} else {
		p.Denied++
	}
	if e.DryRun {
		p.DryRun++
	}
	if e.Error != "" {
		p.Errors++
	}
	if e.Time.After(p.LastSeen) {
		p.LastSeen = e.Time
	}
}

func ranked(m map[string]*Party) []Party {
	out := make([]Party, 0, len(m))
	for _, p := range m {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Party) int {
		if a.Total() != b.Total() {
			return b.Total() - a.Total()
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func latency(v []float64) Latency {
	if len(v) == 0 {
		return Latency{}
	}
	slices.Sort(v)
	q := func(p float64) float64 { // nearest rank
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return v[max(i, 0)]
	}
	return Latency{N: len(v), P50: q(0.50), P95: q(0.95), Max: v[len(v)-1]}
}

// Context returns every event of one investigation in time order (log order
// among equal times): the events carrying the context id, the events of its
// tasks that carry only the task id (push deliveries, say), and the decisions
// that admitted the requests whose answers created its tasks (a new task's id
// and context are not known when its request is decided; task_created names
// the decision).
func (s *Summary) Context(id string) []Event {
	if id == "" {
		return nil
	}
	m := s.contextMembership()
	var out []Event
	for i := range s.Events {
		if slices.Contains(m.of(&s.Events[i]), id) {
			out = append(out, s.Events[i])
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return out
}

// membership says which contexts an event belongs to, by Context's rule: its
// own context id; for an event that carries only a task id, the contexts of
// that task; for a decision, the contexts whose task_created names it.
type membership struct {
	taskCtx     map[string][]string // task id -> context ids
	decisionCtx map[string][]string // admitting decision id -> context ids
	one         [1]string
}

func (s *Summary) contextMembership() *membership {
	m := &membership{taskCtx: map[string][]string{}, decisionCtx: map[string][]string{}}
	for _, e := range s.Events {
		if e.ContextID == "" {
			continue
		}
		if e.TaskID != "" && !slices.Contains(m.taskCtx[e.TaskID], e.ContextID) {
			m.taskCtx[e.TaskID] = append(m.taskCtx[e.TaskID], e.ContextID)
		}
		if e.Type == TypeTaskCreated && e.DecisionID != "" && !slices.Contains(m.decisionCtx[e.DecisionID], e.ContextID) {
			m.decisionCtx[e.DecisionID] = append(m.decisionCtx[e.DecisionID], e.ContextID)
		}
	}
	return m
}

// of is the contexts e belongs to (the slice is reused: read it before the
// next call).
func (m *membership) of(e *Event) []string {
	var out []string
	switch {
	case e.ContextID != "":
		m.one[0] = e.ContextID
		out = m.one[:]
	case e.TaskID != "":
		out = m.taskCtx[e.TaskID]
	}
	if e.Type == TypeDecision && e.DecisionID != "" {
		for _, c := range m.decisionCtx[e.DecisionID] {
			if !slices.Contains(out, c) {
				out = append(slices.Clip(out), c)
			}
		}
	}
	return out
}

// ContextSummary is one context of the log: what a reader picks to see its
// story (writ report -context ID).
type ContextSummary struct {
	ID          string
	First, Last time.Time
	Tasks       int
	Events      int
}

// ContextList lists the log's contexts, the most recent first.
func (s *Summary) ContextList() []ContextSummary {
	by := map[string]*ContextSummary{}
	tasks := map[string]map[string]bool{}
	m := s.contextMembership()
	for i := range s.Events {
		e := &s.Events[i]
		for _, id := range m.of(e) {
			c := by[id]
			if c == nil {
				c = &ContextSummary{ID: id, First: e.Time, Last: e.Time}
				by[id] = c
				tasks[id] = map[string]bool{}
			}
			// The same events Context(id) tells: the counts of the list and of
			// the context's own page agree.
			c.Events++
			if e.Time.Before(c.First) {
				c.First = e.Time
			}
			if e.Time.After(c.Last) {
				c.Last = e.Time
			}
			if e.TaskID != "" {
				tasks[id][e.TaskID] = true
			}
		}
	}
	out := make([]ContextSummary, 0, len(by))
	for id, c := range by {
		c.Tasks = len(tasks[id])
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ContextSummary) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Codes returns the event's distinct denial codes, in the order logged.
func (e *Event) Codes() []string {
	var out []string
	for _, d := range e.Denials {
		if d.Code != "" && !slices.Contains(out, d.Code) {
			out = append(out, d.Code)
		}
	}
	return out
}
