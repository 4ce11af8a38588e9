package report

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	testLog     = "testdata/decisions.jsonl"
	testContext = "ctx-pmt-771"
)

// wantNumbers are the numbers the page must show for testdata/decisions.jsonl
// rendered with Options{Context: testContext}, by element id; counted by hand
// from the log.
var wantNumbers = map[string]string{
	"total-decisions":      "15",
	"total-allowed":        "7",
	"total-denied":         "8",
	"total-dry-run":        "1",
	"total-errors":         "2",
	"total-tasks":          "5",
	"total-artifacts":      "4",
	"total-push-delivered": "1",
	"total-push-failed":    "1",
	"total-violations":     "1",
	"total-contexts":       "8",
	"total-events":         "35",

	"code-CLASSIFICATION_EXCEEDED": "3",
	"code-TENANT_NOT_PERMITTED":    "2",
	"code-NO_ACCEPTABLE_AUTH":      "1",
	"code-UNAUTHENTICATED":         "1",
	"code-DEPTH_EXCEEDED":          "1",
	"code-CYCLE_DETECTED":          "1",
	"code-SCOPE_MISSING":           "1",

	"caller-payments-investigator-allowed":     "5",
	"caller-payments-investigator-denied":      "6",
	"caller-kyc-ops-bot-allowed":               "2",
	"caller-kyc-ops-bot-denied":                "1",
	"caller-_unauthenticated_-denied":          "1",
	"target-sanctions-screening-agent-allowed": "4",
	"target-sanctions-screening-agent-denied":  "4",
	"target-kyc-refresh-agent-allowed":         "1",
	"target-kyc-refresh-agent-denied":          "3",
	"target-marketing-copy-agent-denied":       "1",
	"target-sanctions-clarifier-allowed":       "2",

	"context-id":        testContext,
	"context-events":    "8",
	"context-decisions": "3",
	"context-tasks":     "1",
	"bucket-width":      "30s",
}

func readTestLog(t *testing.T) *Summary {
	t.Helper()
	f, err := os.Open(testLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func renderTestLog(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, readTestLog(t), Options{Context: testContext}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReadSummary(t *testing.T) {
	s := readTestLog(t)
	want := Totals{Events: 35, Decisions: 15, Allowed: 7, Denied: 8, DryRun: 1, Errors: 2, Tasks: 5,
		StateChanges: 7, Artifacts: 4, Violations: 1, PushAttempts: 1, PushDelivered: 1, PushFailed: 1,
		Contexts: 8, UnknownLines: 1}
	if s.Totals != want {
		t.Errorf("totals\n got %+v\nwant %+v", s.Totals, want)
	}
	var codes []string
	for _, c := range s.Codes {
		codes = append(codes, c.Code+"="+itoa(c.Count))
	}
	wantCodes := []string{"CLASSIFICATION_EXCEEDED=3", "TENANT_NOT_PERMITTED=2", "CYCLE_DETECTED=1", "DEPTH_EXCEEDED=1",
		"NO_ACCEPTABLE_AUTH=1", "SCOPE_MISSING=1", "UNAUTHENTICATED=1"}
	if !reflect.DeepEqual(codes, wantCodes) {
		t.Errorf("codes = %v, want %v", codes, wantCodes)
	}
	if c := s.Codes[0]; !reflect.DeepEqual(c.Routes, []string{"kyc-refresh-agent", "marketing-copy-agent"}) ||
		!strings.Contains(c.Reason, "exceeds kyc-refresh-agent's maximum") {
		t.Errorf("CLASSIFICATION_EXCEEDED = %+v", c)
	}
	parties := func(ps []Party) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name+" "+itoa(p.Allowed)+"/"+itoa(p.Denied))
		}
		return out
	}
	if got, want := parties(s.Callers), []string{"payments-investigator 5/6", "kyc-ops-bot 2/1", "(unauthenticated) 0/1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("callers = %v, want %v", got, want)
	}
	if got, want := parties(s.Targets), []string{"sanctions-screening-agent 4/4", "kyc-refresh-agent 1/3",
		"sanctions-clarifier 2/0", "marketing-copy-agent 0/1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("targets = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(s.Unknown, map[string]int{"policy_reloaded": 1}) {
		t.Errorf("unknown = %v", s.Unknown)
	}
	if !reflect.DeepEqual(s.Revisions, []string{"sha256:3f9a1c0e5b2d", "sha256:b71d4e2290aa"}) {
		t.Errorf("revisions = %v", s.Revisions)
	}
	if s.First != time.Date(2026, 11, 3, 9, 14, 2, 118342000, time.UTC) || s.Last != time.Date(2026, 11, 3, 9, 30, 42, 4550000, time.UTC) {
		t.Errorf("span = %v .. %v", s.First, s.Last)
	}
	if l := s.Latency; l.N != 15 || l.Max != 250.4 || l.P50 != 2.21 {
		t.Errorf("latency = %+v", l)
	}
}

func TestContextStory(t *testing.T) {
	s := readTestLog(t)
	var got []string
	for _, e := range s.Context(testContext) {
		step := e.Type
		switch e.Type {
		case TypeDecision:
			step += " " + e.Route
			if len(e.Codes()) > 0 {
				step += " " + strings.Join(e.Codes(), "+")
			}
		case TypeTaskStateChanged:
			step += " " + e.From + ">" + e.To
		}
		got = append(got, step)
	}
	want := []string{
		"decision sanctions-screening-agent",
		"task_created",
		"task_artifact",
		"task_state_changed running>succeeded",
		"decision kyc-refresh-agent TENANT_NOT_PERMITTED+CLASSIFICATION_EXCEEDED",
		"push_attempt",
		"push_delivered", // carries only the task id: joined through it
		"decision sanctions-screening-agent",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("story of %s:\n got %q\nwant %q", testContext, got, want)
	}
	if evs := s.Context("no-such-context"); len(evs) != 0 {
		t.Errorf("unknown context has %d events", len(evs))
	}
}

func TestReadTolerance(t *testing.T) {
	in := "\n  \r\n" +
		`{"time":"2026-11-03T09:00:00Z","type":"decision","allow":true,"route":"r","caller":{"authenticated":true,"agent_id":"a"}}` + "\r\n" +
		`{"time":"2026-11-03T09:00:01Z","type":"something_new","whatever":[1,2]}` + "\n" +
		`{"time":"2026-11-03T09:00:02+04:00","type":"push_failed","task_id":"t","push":{"host":"h","attempt":3,"reason":"timeout"},"new_field":1}` + "\n" +
		`{"time":"2026-11-03T09:00:03Z","type":"push_attempt","task_id":"t","push":{"status":null}}` + "\n\n"
	s, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.Totals.Decisions != 1 || s.Totals.PushFailed != 1 || s.Totals.PushAttempts != 1 || s.Unknown["something_new"] != 1 {
		t.Fatalf("summary = %+v, unknown %v", s.Totals, s.Unknown)
	}
	if e := s.Events[1]; e.LineNo != 5 || e.Push.Reason != "timeout" || e.Time != time.Date(2026, 11, 3, 5, 0, 2, 0, time.UTC) {
		t.Fatalf("push event = %+v %+v", e, e.Push)
	}
	if s, err := Read(strings.NewReader("")); err != nil || s.Totals.Events != 0 {
		t.Fatalf("empty log: %v, %+v", err, s)
	}
}

func TestReadErrors(t *testing.T) {
	ok := `{"time":"2026-11-03T09:00:00Z","type":"decision"}` + "\n"
	for _, c := range []struct{ name, in, want string }{
		{"broken JSON", ok + "\n" + `{"time":"2026-11-03T09:00:00Z","type":"decision"` + "\n", "line 3:"},
		{"not an object", ok + `["decision"]` + "\n", "line 2: not a JSON object"},
		{"trailing garbage", ok + ok + `{"type":"decision"} x` + "\n", "line 3:"},
		{"no time", `{"type":"task_created","task_id":"t"}`, "line 1: task_created event without a time"},
		{"bad time", `{"time":"yesterday","type":"decision"}`, "line 1: time"},
		{"wrong field type", ok + `{"time":"2026-11-03T09:00:00Z","type":"decision","allow":"yes"}`, `line 2: field "allow"`},
		{"type not a string", `{"time":"2026-11-03T09:00:00Z","type":7}`, "line 1:"},
		{"long line", ok + `{"type":"decision","x":"` + strings.Repeat("a", maxLine) + `"}`, "line 2: longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestReadFiles: the logs at paths are read as ReadLogs reads them, named by
// their paths, "-" as stdin (once); a file that cannot be opened is named.
func TestReadFiles(t *testing.T) {
	raw, err := os.ReadFile(testLog)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := ReadFiles([]string{testLog, "-"}, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{testLog, "stdin"}; !reflect.DeepEqual(sum.Logs, want) || sum.Totals.Decisions != 30 {
		t.Errorf("logs %v, %d decisions; want %v, 30", sum.Logs, sum.Totals.Decisions, want)
	}
	if _, err := ReadFiles([]string{"-", "-"}, bytes.NewReader(raw)); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("stdin twice: %v", err)
	}
	if _, err := ReadFiles([]string{"testdata/none.jsonl"}, nil); err == nil || !strings.Contains(err.Error(), "testdata/none.jsonl") {
		t.Errorf("a missing file: %v", err)
	}
}

var (
	// tagRE matches real tags: text is escaped, so a '<' in it is "&lt;".
	tagRE      = regexp.MustCompile(`<[a-zA-Z!/][^>]*>`)
	loadingTag = regexp.MustCompile(`(?i)^<\s*(link|script|img|iframe|object|embed|video|audio|source|track|base|frame|image|use|feImage|input|picture|portal)\b`)
	// resourceAttr is an attribute a browser would fetch, unless it holds a
	// fragment (#...) or data:.
	resourceAttr = regexp.MustCompile(`(?i)\s(src|href|srcset|action|formaction|poster|data|xlink:href|background|manifest|ping|codebase|lowsrc)\s*=\s*["']?\s*([^"'\s>]*)`)
	styleBlock   = regexp.MustCompile(`(?is)<style[^>]*>(.*?)</style>`)
	cssFetch     = regexp.MustCompile(`(?i)url\s*\(|@import|image-set\s*\(`)
)

// assertSelfContained fails unless the page would make a browser fetch nothing:
// no loading elements, no resource attributes but fragments and data:, no CSS
// url() or @import in a style sheet or attribute, and a Content-Security-Policy
// that forbids fetching in any case.
func assertSelfContained(t *testing.T, html string) {
	t.Helper()
	for _, p := range fetches(html) {
		t.Error(p)
	}
}

func fetches(html string) []string {
	var out []string
	for _, tag := range tagRE.FindAllString(html, -1) {
		if loadingTag.MatchString(tag) {
			out = append(out, "a loading element: "+tag)
		}
		for _, m := range resourceAttr.FindAllStringSubmatch(tag, -1) {
			if v := strings.ToLower(m[2]); !strings.HasPrefix(v, "#") && !strings.HasPrefix(v, "data:") {
				out = append(out, "a resource attribute: "+strings.TrimSpace(m[0])+" in "+tag)
			}
		}
		if cssFetch.MatchString(tag) {
			out = append(out, "CSS that fetches: "+tag)
		}
	}
	for _, m := range styleBlock.FindAllStringSubmatch(html, -1) {
		if cssFetch.MatchString(m[1]) {
			out = append(out, "the style sheet fetches: "+cssFetch.FindString(m[1]))
		}
	}
	if !strings.Contains(html, `http-equiv="Content-Security-Policy" content="default-src 'none';`) {
		out = append(out, "the page has no Content-Security-Policy forbidding fetches")
	}
	return out
}

// TestFetchesCatches keeps the self-containment check honest.
func TestFetchesCatches(t *testing.T) {
	csp := `<meta http-equiv="Content-Security-Policy" content="default-src 'none';">`
	for _, bad := range []string{
		`<link rel="stylesheet" href="https://cdn.example/x.css">`,
		`<script src="//cdn.example/x.js"></script>`,
		`<a href="https://example.org/">x</a>`,
		`<svg><image xlink:href="http://example.org/i.png"/></svg>`,
		`<style>@font-face { src: url(https://fonts.example/f.woff2) }</style>`,
		`<div style="background: url('x.png')">`,
		`<img srcset="a.png 2x">`,
	} {
		if len(fetches(csp+bad)) == 0 {
			t.Errorf("not caught: %s", bad)
		}
	}
	if p := fetches(csp + `<a href="#context">x</a><p title="https://example.org/">see https://example.org/ &lt;img src=https://x&gt;</p>`); len(p) != 0 {
		t.Errorf("false alarm: %v", p)
	}
	if len(fetches("<p>")) == 0 {
		t.Error("a page without the CSP passes")
	}
}

// elementText reads the text of the element with the given id out of an HTML
// page (the element must hold text only).
func elementText(html, id string) (string, bool) {
	m := regexp.MustCompile(`\bid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(html)
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

func checkNumbers(t *testing.T, html string) {
	t.Helper()
	for id, want := range wantNumbers {
		if got, ok := elementText(html, id); !ok {
			t.Errorf("no element with id %q", id)
		} else if got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
}

func TestRender(t *testing.T) {
	html := renderTestLog(t)
	checkNumbers(t, html)
	assertSelfContained(t, html)
	for _, want := range []string{
		"<svg", "Allowed and denied over time", "Denials by code", "Top callers", "Top targets",
		// the context's delegation chain, outermost first, and its task's states
		`<span class="hop">orchestrator</span>`, "payments-investigator</span>", "sanctions-screening-agent</span>",
		">running</text>", ">succeeded</text>",
		// the timeline, with the denial's codes and the push delivery joined by task id
		"task task-771s: running → succeeded", "TENANT_NOT_PERMITTED</code> — kyc-refresh-agent serves tenant",
		"PUSH DELIVERED", "log line 19", `produced &#34;sanctions-screening&#34;`,
		"policy_reloaded</code> × 1",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Exactly the context's events, in time order.
	items := regexp.MustCompile(`log line (\d+)`).FindAllStringSubmatch(html, -1)
	var lines []string
	for _, m := range items {
		lines = append(lines, m[1])
	}
	if want := []string{"13", "14", "15", "16", "17", "18", "19", "20"}; !reflect.DeepEqual(lines, want) {
		t.Errorf("timeline lines = %v, want %v", lines, want)
	}
	// Element ids are unique.
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bid="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		if seen[m[1]] {
			t.Errorf("duplicate id %q", m[1])
		}
		seen[m[1]] = true
	}
}

func TestRenderWithoutContext(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, readTestLog(t), Options{Title: "Night shift"}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	if strings.Contains(html, `id="context"`) || !strings.Contains(html, "<title>Night shift</title>") {
		t.Error("a page without a context shows one, or lacks its title")
	}
	b.Reset()
	if err := Render(&b, readTestLog(t), Options{Context: "ctx-nowhere"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `id="context-empty"`) {
		t.Error("an unknown context is not reported as empty")
	}
}

func TestRenderEscapes(t *testing.T) {
	evil := `<script>alert(1)</script>`
	in := `{"time":"2026-11-03T09:00:00Z","type":"decision","route":"javascript:alert(2)","context_id":"c\"><img src=x>",` +
		`"caller":{"authenticated":true,"agent_id":"` + strings.ReplaceAll(evil, "/", `\/`) + `","issuer":"https://evil.example/x.js","chain":["a\" onmouseover=\"x"]},` +
		`"denials":[{"code":"X\" style=\"background:url(https://evil.example/p.png)","reason":"<img src=https://evil.example/q.png>"}]}` + "\n" +
		`{"time":"2026-11-03T09:00:01Z","type":"task_artifact","task_id":"t","context_id":"c\"><img src=x>","artifact":"</title><script>x</script>"}`
	s, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, s, Options{Context: `c"><img src=x>`, Title: evil}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	assertSelfContained(t, html)
	for _, bad := range []string{"<script", "<img", `" onmouseover="`, `style="background`} {
		if strings.Contains(html, bad) {
			t.Errorf("unescaped %q in the page", bad)
		}
	}
	if !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile agent id is not shown escaped")
	}
}

func TestRenderEmptyLog(t *testing.T) {
	s, err := Read(strings.NewReader("\n"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, s, Options{Context: "c"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := elementText(b.String(), "total-decisions"); got != "0" || !strings.Contains(b.String(), "No decisions in this log.") {
		t.Errorf("empty page: total-decisions %q", got)
	}
	if err := Render(&b, nil, Options{}); err == nil {
		t.Error("Render(nil) succeeded")
	}
}

func TestBucketWidth(t *testing.T) {
	t0 := time.Date(2026, 11, 3, 9, 14, 2, 0, time.UTC)
	for _, c := range []struct {
		span time.Duration
		want time.Duration
	}{
		{0, time.Second},
		{40 * time.Second, time.Second},
		{90 * time.Second, 2 * time.Second},
		{16 * time.Minute, 30 * time.Second},
		{3 * time.Hour, 5 * time.Minute},
		{30 * time.Hour, time.Hour},
		{20 * 24 * time.Hour, 12 * time.Hour},
		{400 * 24 * time.Hour, 14 * 24 * time.Hour},
		{1000 * 24 * time.Hour, 28 * 24 * time.Hour},
		{5000 * 24 * time.Hour, 4 * 28 * 24 * time.Hour},
	} {
		w := bucketWidth(t0, t0.Add(c.span))
		if w != c.want {
			t.Errorf("span %v: width %v, want %v", c.span, w, c.want)
		}
		if n := t0.Add(c.span).Truncate(w).Sub(t0.Truncate(w))/w + 1; n > maxBuckets {
			t.Errorf("span %v: %d buckets", c.span, n)
		}
	}
}

func TestTimeChartBuckets(t *testing.T) {
	s := readTestLog(t)
	c := buildTimeChart(s)
	allowed, denied := 0, 0
	for _, b := range c.Bars {
		allowed += b.Allowed
		denied += b.Denied + b.DryRn
	}
	if c.Buckets != 34 || len(c.Bars) != 34 || allowed != 7 || denied != 8 {
		t.Errorf("chart: %d buckets, %d allowed, %d denied", c.Buckets, allowed, denied)
	}
}

func TestIDs(t *testing.T) {
	ids := idSet{}
	got := []string{ids.make("code-A B"), ids.make("code-A_B"), ids.make("code-A/B"), ids.make("caller-ü")}
	want := []string{"code-A_B", "code-A_B-2", "code-A_B-3", "caller-_"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ids = %q, want %q", got, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestContextStoryFromTheAdmittingDecision: a new task's request is decided
// before its id and context exist; task_created names the decision, and the
// context's story starts with it.
func TestContextStoryFromTheAdmittingDecision(t *testing.T) {
	log := `{"time":"2026-11-03T09:00:00Z","type":"decision","decision_id":"d-admit","route":"sanctions","operation":"send","caller":{"authenticated":true,"agent_id":"inv"},"allow":true}
{"time":"2026-11-03T09:00:00.5Z","type":"decision","decision_id":"d-other","route":"sanctions","operation":"send","caller":{"authenticated":true,"agent_id":"inv"},"allow":true}
{"time":"2026-11-03T09:00:01Z","type":"task_created","route":"sanctions","task_id":"t-1","context_id":"c-1","decision_id":"d-admit","to":"running"}
{"time":"2026-11-03T09:00:02Z","type":"task_state_changed","route":"sanctions","task_id":"t-1","context_id":"c-1","from":"running","to":"succeeded"}
{"time":"2026-11-03T09:00:03Z","type":"task_created","route":"sanctions","task_id":"t-2","context_id":"c-2","decision_id":"d-other","to":"running"}
`
	s, err := Read(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range s.Context("c-1") {
		got = append(got, e.Type+":"+e.DecisionID+e.TaskID)
	}
	want := []string{"decision:d-admit", "task_created:d-admitt-1", "task_state_changed:t-1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("story %q, want %q", got, want)
	}
	list := s.ContextList()
	// The list counts the events the context's story tells (the admitting
	// decision included): it said 2 where the story showed 3.
	if len(list) != 2 || list[0].ID != "c-2" || list[1].ID != "c-1" || list[1].Tasks != 1 || list[1].Events != 3 {
		t.Errorf("contexts %+v: want c-2 (latest) then c-1 with one task and three events", list)
	}
	for _, path := range []string{"", testLog} {
		sum := s
		if path != "" {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			sum, err = Read(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range sum.ContextList() {
			if n := len(sum.Context(c.ID)); c.Events != n {
				t.Errorf("%s: context %s is listed with %d events, its story has %d", path, c.ID, c.Events, n)
			}
		}
	}
	var b bytes.Buffer
	if err := Render(&b, s, Options{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `id="contexts"`) || !strings.Contains(page, ">c-1<") || !strings.Contains(page, ">c-2<") {
		t.Error("the page does not list the contexts to pick from")
	}
	// Zero counts are not coloured as alarms; non-zero ones are.
	for _, id := range []string{"total-denied", "total-errors", "total-push-failed", "total-violations", "total-dry-run"} {
		re := regexp.MustCompile(`<div class="kpi( [a-z]+)?"><span class="n" id="` + id + `">`)
		m := re.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no tile %s", id)
		}
		if m[1] != "" {
			t.Errorf("tile %s is zero but coloured %q", id, strings.TrimSpace(m[1]))
		}
	}
	if !regexp.MustCompile(`<div class="kpi allow"><span class="n" id="total-allowed">2<`).MatchString(page) {
		t.Error("a non-zero allowed tile is not coloured")
	}
}
