package egress_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
)

// directory asks the egress listener which targets the agent may delegate
// to, and returns their names.
func (w *world) directory(parent, query string, hdr map[string]string) (int, []string) {
	w.t.Helper()
	resp, body := w.call(parent, "/.well-known/writ/directory"+query, "", hdr)
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	var d struct {
		Agents []struct {
			Name       string `json:"name"`
			Interfaces []struct {
				URL string `json:"url"`
			} `json:"supportedInterfaces"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		w.t.Fatalf("directory: %v: %s", err, body)
	}
	var names []string
	for _, a := range d.Agents {
		if len(a.Interfaces) != 1 || a.Interfaces[0].URL != "http://"+w.a.egress.Addr()+"/to/"+a.Name {
			w.t.Fatalf("the entry of %s points elsewhere than the egress listener: %s", a.Name, body)
		}
		names = append(names, a.Name)
	}
	return 200, names
}

// TestDiscoveryListsOnlyPermittedTargets: the directory on the egress
// listener lists only the targets the agent may delegate this task to.
// Threat: the agent's model is shown agents it may not use (another
// tenant's, one not cleared for the task's data, one that would close a
// cycle) and picks one, or learns of them. Defence: each target is listed
// only when the policy lets this agent, inside the task Writ-Parent names,
// discover it and send it that task; every entry points back at the egress
// listener.
func TestDiscoveryListsOnlyPermittedTargets(t *testing.T) {
	w := newWorld(t, worldOptions{})
	parent := w.inbound(w.token(orchestrator))
	status, names := w.directory(parent, "", nil)
	if status != 200 || !slices.Equal(names, []string{screener, "raw"}) {
		t.Fatalf("listed %v (%d)", names, status)
	}
	if _, names := w.directory(parent, "?tags=sanctions", nil); !slices.Equal(names, []string{screener}) {
		t.Fatalf("tags=sanctions listed %v", names)
	}
	// A task at internal, no chain before the agent (a root call): the
	// internal-only agent and the orchestrator may be used; never itself.
	if _, names := w.directory("", "", map[string]string{"Authorization": "Bearer " + w.own("u-9")}); !slices.Equal(names,
		[]string{screener, "raw", "internal-only", "orchestrator"}) {
		t.Fatalf("a root call's directory %v", names)
	}
	if status, _ := w.directory("0123456789abcdef01234567", "", nil); status != 403 {
		t.Fatalf("an unknown parent's directory: %d", status)
	}
	if n := len(w.trap.Requests()) + len(w.screener.Requests()) + int(w.front.calls.Load()); n != 0 {
		t.Fatalf("the directory asked a target or the STS (%d)", n)
	}
}

// parentInterceptor puts Writ-Parent on every call of an a2a-go client: how
// an agent written with a2a-go passes the inbound request's decision id on
// (docs/egress.md).
type parentInterceptor struct {
	a2aclient.PassthroughInterceptor
	parent string
}

func (p parentInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	if req.Meta == nil {
		req.Meta = a2aclient.CallMeta{}
	}
	req.Meta["Writ-Parent"] = []string{p.parent}
	return ctx, nil
}

// TestA2AGoClientThroughEgress: an agent written with a2a-go resolves the
// target's card through the egress listener (its interfaces point back at
// the listener) and sends a message and a stream through it, passing
// Writ-Parent with a call interceptor.
func TestA2AGoClientThroughEgress(t *testing.T) {
	w := newWorld(t, worldOptions{})
	parent := w.inbound(w.token(orchestrator))
	ctx := context.Background()
	base := "http://" + w.a.egress.Addr() + "/to/" + screener
	card, err := agentcard.DefaultResolver.Resolve(ctx, base, agentcard.WithRequestHeader("Writ-Parent", parent))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(card.URL, base) || card.Name != screener {
		t.Fatalf("the card points at %s, not the egress listener", card.URL)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithInterceptors(parentInterceptor{parent: parent}))
	if err != nil {
		t.Fatal(err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "Screen Acme Trading FZE"})
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	if tk, ok := res.(*a2a.Task); !ok || tk.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("send: %#v", res)
	}
	var states []a2a.TaskState
	for ev, err := range client.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "again"})}) {
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			states = append(states, st.Status.State)
		}
	}
	if len(states) == 0 || states[len(states)-1] != a2a.TaskStateCompleted {
		t.Fatalf("stream states %v", states)
	}
	// Card, send and stream: three decisions, each with its own token's chain.
	for _, d := range w.a.rec.egressDecisions() {
		if !d.Allow || d.ParentDecisionID != parent || !slices.Equal(d.Intermediaries, []string{"orchestrator", local}) {
			t.Fatalf("decision %+v", d)
		}
	}
	if n := len(w.a.rec.egressDecisions()); n != 3 {
		t.Fatalf("%d egress decisions", n)
	}
}
