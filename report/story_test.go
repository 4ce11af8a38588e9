package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/decisionlog"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/task"
)

const chainID = "q3Zr8sXyT1m0cV2bNf7LkA"

var (
	storyT0 = time.Date(2026, 11, 30, 14, 2, 7, 0, time.UTC)
	a2aSend = task.Protocol{Name: "a2a", Version: "1.0", Binding: task.BindingJSONRPC, Method: "SendMessage"}
)

func at(ms int) time.Time { return storyT0.Add(time.Duration(ms) * time.Millisecond) }

// caller is the caller a writ's ingress decision names: agent, acting for
// analyst-7, after the earlier hops.
func caller(agent string, chain ...string) events.Caller {
	return events.Caller{Authenticated: true, Method: "jwt", Issuer: "https://sts.bank.example", AgentID: agent,
		UserID: "analyst-7", Tenant: "retail", Chain: chain}
}

func ingress(id, route string, t time.Time, c events.Caller) events.Decision {
	return events.Decision{Time: t, ID: id, Mode: events.ModeSidecar, Route: route, Operation: task.OpSend, Protocol: a2aSend,
		Caller: c, Allow: true, Revision: "rev-9", ChainID: chainID}
}

func egress(id, route, parent, target string, t time.Time, via ...string) events.Decision {
	return events.Decision{Time: t, ID: id, Mode: "egress", Route: route, Operation: task.OpSend, Protocol: a2aSend,
		Caller: caller(route, via[:len(via)-1]...), Allow: true, Revision: "rev-9", ChainID: chainID,
		Direction: events.DirectionEgress, ParentDecisionID: parent, Initiator: "analyst-7", Intermediaries: via, Target: target}
}

// writeWritLog writes the decisions with decisionlog's own writer, as the
// writ of one agent would, to dir/name.
func writeWritLog(t *testing.T, dir, name string, decs ...events.Decision) string {
	t.Helper()
	path := filepath.Join(dir, name)
	l, err := decisionlog.New(config.DecisionLog{Output: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range decs {
		l.Decided(d)
	}
	l.TaskChanged(events.Task{Time: decs[0].Time.Add(time.Millisecond), Kind: events.TaskCreated, Route: decs[0].Route,
		TaskID: "task-" + name, ContextID: "ctx-" + name, DecisionID: decs[0].ID, To: task.Running})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return path
}

// threeHops writes the logs of three writs on one delegation: portal calls
// agent-a (hop 1); agent-a's egress writ lets it call agent-b (hop 2), whose
// writ admits the call, and agent-d (a branch, with no writ of its own
// here); agent-b calls agent-c (hop 3), whose writ denies. agent-c's clock
// is behind: its decision seems to precede the call that caused it. Each log
// also holds decisions of another delegation and of none.
func threeHops(t *testing.T) (a, b, c string) {
	t.Helper()
	dir := t.TempDir()
	deny := ingress("c-in", "agent-c", at(25), caller("agent-b", "portal", "agent-a"))
	deny.Allow = false
	deny.Denials = []task.Denial{{Code: "AUTHORITY_WIDENED", Reason: "scope payments:write is not within agent-a's scopes"}}
	other := ingress("x-in", "agent-a", at(12), caller("kyc-bot"))
	other.ChainID = "another-chain"
	none := ingress("n-in", "agent-b", at(5), caller("legacy-client"))
	none.ChainID = ""
	a = writeWritLog(t, dir, "a.log",
		ingress("a-in", "agent-a", at(0), caller("portal")),
		egress("a-out", "agent-a", "a-in", "agent-b", at(10), "portal", "agent-a"),
		other,
		egress("a-out-d", "agent-a", "a-in", "agent-d", at(40), "portal", "agent-a"))
	b = writeWritLog(t, dir, "b.log",
		none,
		ingress("b-in", "agent-b", at(14), caller("agent-a", "portal")),
		egress("b-out", "agent-b", "b-in", "agent-c", at(30), "portal", "agent-a", "agent-b"))
	c = writeWritLog(t, dir, "c.log", deny)
	return a, b, c
}

func readSources(t *testing.T, paths ...string) *Summary {
	t.Helper()
	var srcs []Source
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		srcs = append(srcs, Source{Name: filepath.Base(p), R: f})
	}
	s, err := ReadLogs(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestThreeHopStory: three writs' logs, given in any order, tell one
// delegation in the order it ran: each egress decision after its inbound
// one, each ingress decision after the call it decides (whatever the
// clocks say), a branch after the path it left.
func TestThreeHopStory(t *testing.T) {
	a, b, c := threeHops(t)
	for _, f := range []string{a, b, c} {
		if v, err := decisionlog.Verify([]string{f}, nil); err != nil || !v.OK() {
			t.Fatalf("%s does not verify: %v %v", f, err, v.Failure)
		}
	}
	s := readSources(t, c, a, b)
	d := s.Delegation(chainID)
	if d == nil {
		t.Fatal("no delegation")
	}
	var got []string
	for _, st := range d.Steps {
		got = append(got, st.DecisionID+" "+st.Direction+" "+st.At+" "+st.From+">"+st.To)
	}
	want := []string{
		"a-in ingress agent-a portal>agent-a",
		"a-out egress agent-a agent-a>agent-b",
		"b-in ingress agent-b agent-a>agent-b",
		"b-out egress agent-b agent-b>agent-c",
		"c-in ingress agent-c agent-b>agent-c",
		"a-out-d egress agent-a agent-a>agent-d",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("steps\n got %q\nwant %q", got, want)
	}
	if d.Initiator != "analyst-7" || d.Hops != 3 || d.Allowed != 5 || d.Denied != 1 ||
		!reflect.DeepEqual(d.Logs, []string{"a.log", "b.log", "c.log"}) {
		t.Errorf("delegation %+v", d)
	}
	if st := d.Steps[4]; st.After != 4 || st.Joined != JoinedCall || st.Hop != 3 ||
		!reflect.DeepEqual(st.Path, []string{"analyst-7", "portal", "agent-a", "agent-b", "agent-c"}) {
		t.Errorf("c's step %+v", st)
	}
	if st := d.Steps[3]; st.After != 3 || st.Joined != JoinedParent {
		t.Errorf("b's egress step %+v", st)
	}

	var text bytes.Buffer
	if err := WriteStory(&text, d); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, w := range []string{
		"delegation " + chainID + ": initiated by analyst-7, 3 hop(s), 6 decision(s) (5 allowed, 1 denied)",
		"from a.log, b.log, c.log",
		" 5. 14:02:07.025 +25 ms  hop 3  ingress at agent-c  DENY send AUTHORITY_WIDENED\n" +
			"    analyst-7 → portal → agent-a → agent-b → agent-c\n" +
			"    decision c-in · c.log:2 · after 4 (the call it decides)\n" +
			"      AUTHORITY_WIDENED: scope payments:write is not within agent-a's scopes\n",
		" 2. 14:02:07.010 +10 ms  hop 2  egress  at agent-a  ALLOW send\n    analyst-7 → portal → agent-a → agent-b\n    decision a-out · a.log:3 · after 1 (its inbound decision)",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("story lacks %q:\n%s", w, out)
		}
	}
	order := regexp.MustCompile(`decision ([a-z-]+) ·`).FindAllStringSubmatch(out, -1)
	var ids []string
	for _, m := range order {
		ids = append(ids, m[1])
	}
	if want := []string{"a-in", "a-out", "b-in", "b-out", "c-in", "a-out-d"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("text order %v, want %v", ids, want)
	}

	var list bytes.Buffer
	if err := WriteDelegations(&list, s.Delegations()); err != nil {
		t.Fatal(err)
	}
	if l := list.String(); !strings.HasPrefix(l, chainID+"  initiator analyst-7  3 hop(s)  6 decision(s): 5 allowed, 1 denied") ||
		!strings.Contains(l, "another-chain  initiator analyst-7  1 hop(s)  1 decision(s)") || strings.Count(l, "\n") != 2 {
		t.Errorf("delegations:\n%s", l)
	}
}

// TestThreeHopStoryHTML: the same story on the page, in the report's look.
func TestThreeHopStoryHTML(t *testing.T) {
	a, b, c := threeHops(t)
	s := readSources(t, a, b, c)
	var page bytes.Buffer
	if err := Render(&page, s, Options{Chain: chainID}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	assertSelfContained(t, html)
	for id, want := range map[string]string{
		"delegation-id": chainID, "delegation-initiator": "analyst-7", "delegation-hops": "3",
		"delegation-decisions": "6", "delegation-allowed": "5", "delegation-denied": "1",
		"logs": "a.log, b.log, c.log", "total-decisions": "8",
	} {
		if got, ok := elementText(html, id); !ok || got != want {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	steps := regexp.MustCompile(`(?s)<li class="(allow|deny)" id="step-(\d)">.*?<span>decision ([a-z-]+)</span>`).FindAllStringSubmatch(html, -1)
	var got []string
	for _, m := range steps {
		got = append(got, m[2]+":"+m[3]+":"+m[1])
	}
	if want := []string{"1:a-in:allow", "2:a-out:allow", "3:b-in:allow", "4:b-out:allow", "5:c-in:deny", "6:a-out-d:allow"}; !reflect.DeepEqual(got, want) {
		t.Errorf("page steps %v, want %v", got, want)
	}
	for _, w := range []string{
		`<span class="badge dir">egress</span>hop 2 · decided at <b>agent-a</b>: send`,
		`<span class="hop user">analyst-7</span><span class="arrow">→</span><span class="hop">portal</span><span class="arrow">→</span><span class="hop">agent-a</span><span class="arrow">→</span><span class="hop caller">agent-b</span><span class="arrow">→</span><span class="hop target denied">agent-c</span>`,
		`<code>AUTHORITY_WIDENED</code> — scope payments:write is not within agent-a&#39;s scopes`,
		`<span>after step 4 (the call it decides)</span><span>c.log:2</span>`,
		`id="delegations"`, `<td class="mono">another-chain</td>`,
	} {
		if !strings.Contains(html, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if strings.Contains(html, "Skipped lines of unknown type") {
		t.Error("the custody lines are counted as unknown")
	}
	page.Reset()
	if err := Render(&page, s, Options{Chain: "no-such-chain"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `id="delegation-empty"`) {
		t.Error("an unknown chain is not reported as empty")
	}
}

// TestStoryJoinsTheNearestCall: two calls on the same hop (a retry); each
// ingress decision follows the call nearest to it in time.
func TestStoryJoinsTheNearestCall(t *testing.T) {
	evs := []events.Decision{
		ingress("a-in", "agent-a", at(0), caller("portal")),
		egress("a-out-1", "agent-a", "a-in", "agent-b", at(10), "portal", "agent-a"),
		egress("a-out-2", "agent-a", "a-in", "agent-b", at(500), "portal", "agent-a"),
		ingress("b-in-2", "agent-b", at(495), caller("agent-a", "portal")),
		ingress("b-in-1", "agent-b", at(12), caller("agent-a", "portal")),
		// Same hop, but another agent's call: not joined to agent-a's.
		ingress("b-in-x", "agent-b", at(13), caller("agent-z", "portal")),
	}
	path := writeWritLog(t, t.TempDir(), "all.log", evs...)
	d := readSources(t, path).Delegation(chainID)
	var got []string
	for _, st := range d.Steps {
		got = append(got, st.DecisionID)
	}
	if want := []string{"a-in", "a-out-1", "b-in-1", "a-out-2", "b-in-2", "b-in-x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
}

// TestStoryOfACycle: lines that link in a circle (forged, or broken) still
// make a story that tells every decision once.
func TestStoryOfACycle(t *testing.T) {
	out := egress("e-1", "agent-a", "i-1", "agent-b", at(0), "portal", "agent-a")
	in := ingress("i-1", "agent-b", at(1), caller("agent-a", "portal"))
	late := egress("e-2", "agent-b", "i-1", "agent-c", at(2), "portal", "agent-a", "agent-b")
	path := writeWritLog(t, t.TempDir(), "cycle.log", late, out, in)
	d := readSources(t, path).Delegation(chainID)
	var got []string
	for _, st := range d.Steps {
		got = append(got, st.DecisionID)
	}
	if len(got) != 3 || !slices.Contains(got, "e-1") || !slices.Contains(got, "i-1") || !slices.Contains(got, "e-2") {
		t.Errorf("steps %v, want each of the three once", got)
	}
	// Only the link that closes the circle is cut: e-2 still follows its
	// inbound decision.
	for _, st := range d.Steps {
		if st.DecisionID == "e-2" && (st.Joined != JoinedParent || d.Steps[st.After-1].DecisionID != "i-1") {
			t.Errorf("e-2: %+v", st)
		}
	}
}

// TestStoryStartsAtTheRequestWithoutChainID: the token a delegation started
// with came from the identity provider and carried no chain id (the STS
// mints it at the first exchange), so the first agent's inbound decision
// has none; the story begins at it all the same, joined by the
// parent_decision_id of the calls it caused, and another delegation's root
// stays out.
func TestStoryStartsAtTheRequestWithoutChainID(t *testing.T) {
	root := ingress("a-in", "agent-a", at(0), caller("portal"))
	root.ChainID = ""
	other := ingress("z-in", "agent-a", at(1), caller("portal"))
	other.ChainID = ""
	path := writeWritLog(t, t.TempDir(), "a.log", root, other,
		egress("a-out", "agent-a", "a-in", "agent-b", at(10), "portal", "agent-a"),
		ingress("b-in", "agent-b", at(12), caller("agent-a", "portal")))
	s := readSources(t, path)
	d := s.Delegation(chainID)
	var got []string
	for _, st := range d.Steps {
		got = append(got, st.DecisionID+" "+st.Joined)
	}
	if want := []string{"a-in ", "a-out " + JoinedParent, "b-in " + JoinedCall}; !reflect.DeepEqual(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if d.Hops != 2 || d.Initiator != "analyst-7" {
		t.Errorf("delegation %+v", d)
	}
	if l := s.Delegations(); len(l) != 1 || l[0].Decisions != 3 {
		t.Errorf("delegations %+v", l)
	}
}

// TestStoryJoinsTheCallOfItsOperation: an agent's client fetches the card,
// then sends, on one hop; each of the target writ's decisions follows the
// call of its own operation, even when the other call is nearer in time.
func TestStoryJoinsTheCallOfItsOperation(t *testing.T) {
	card := egress("a-card", "agent-a", "a-in", "agent-b", at(10), "portal", "agent-a")
	card.Operation = task.OpCard
	inCard := ingress("b-card", "agent-b", at(40), caller("agent-a", "portal"))
	inCard.Operation = task.OpCard
	path := writeWritLog(t, t.TempDir(), "all.log",
		ingress("a-in", "agent-a", at(0), caller("portal")), card,
		egress("a-send", "agent-a", "a-in", "agent-b", at(45), "portal", "agent-a"), inCard,
		ingress("b-send", "agent-b", at(50), caller("agent-a", "portal")))
	d := readSources(t, path).Delegation(chainID)
	var got []string
	for _, st := range d.Steps {
		got = append(got, fmt.Sprintf("%s after %d", st.DecisionID, st.After))
	}
	if want := []string{"a-in after 0", "a-card after 1", "b-card after 2", "a-send after 1", "b-send after 4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
}
