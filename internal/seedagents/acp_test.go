package seedagents

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// acpDo sends one request and decodes a JSON answer into out (if not nil).
func acpDo(t *testing.T, ctx context.Context, method, url, body string, out any) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(CallerHeader, "acp-caller")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, url, err)
		}
	}
	return resp
}

func runBody(mode, customer string) string {
	b, _ := json.Marshal(map[string]any{
		"agent_name": ACPAgentName,
		"mode":       mode,
		"input": []any{map[string]any{"role": "user", "parts": []any{
			map[string]any{"content_type": "text/plain", "content": "Refresh KYC"},
			map[string]any{"content_type": "application/json", "content": `{"customer":"` + customer + `"}`},
		}}},
	})
	return string(b)
}

func checkOutput(t *testing.T, r acpRun, customer string) {
	t.Helper()
	if r.Status != "completed" || r.FinishedAt == nil || len(r.Output) != 1 {
		t.Fatalf("run %+v", r)
	}
	m := r.Output[0]
	if m.Role != "agent/"+ACPAgentName || len(m.Parts) != 2 {
		t.Fatalf("output %+v", m)
	}
	if p := m.Parts[0]; p.ContentType != "text/plain" || p.Content == nil || !strings.Contains(*p.Content, customer) {
		t.Fatalf("text part %+v", p)
	}
	var data map[string]any
	if p := m.Parts[1]; p.Name != "kyc-refresh" || p.ContentType != "application/json" || p.Content == nil ||
		json.Unmarshal([]byte(*p.Content), &data) != nil || data["customer"] != customer {
		t.Fatalf("json part %+v", p)
	}
}

func TestACPAgents(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartACP)
	var list struct {
		Agents []map[string]any `json:"agents"`
	}
	if resp := acpDo(t, ctx, "GET", a.URL+"/agents", "", &list); resp.StatusCode != 200 || len(list.Agents) != 1 || list.Agents[0]["name"] != ACPAgentName {
		t.Fatalf("list: %d %+v", resp.StatusCode, list)
	}
	var m map[string]any
	if resp := acpDo(t, ctx, "GET", a.URL+"/agents/"+ACPAgentName, "", &m); resp.StatusCode != 200 || m["name"] != ACPAgentName || m["description"] == "" {
		t.Fatalf("get: %d %+v", resp.StatusCode, m)
	}
	var e acpError
	if resp := acpDo(t, ctx, "GET", a.URL+"/agents/nobody", "", &e); resp.StatusCode != 404 || e.Code != "not_found" {
		t.Fatalf("unknown agent: %d %+v", resp.StatusCode, e)
	}
}

func TestACPSyncRun(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartACP)
	var r acpRun
	resp := acpDo(t, ctx, "POST", a.URL+"/runs", runBody("sync", "Globex Ltd"), &r)
	if resp.StatusCode != 200 || resp.Header.Get("Run-ID") != r.RunID || r.AgentName != ACPAgentName || r.SessionID == "" {
		t.Fatalf("sync: %d %+v", resp.StatusCode, r)
	}
	checkOutput(t, r, "Globex Ltd")

	var got acpRun
	acpDo(t, ctx, "GET", a.URL+"/runs/"+r.RunID, "", &got)
	checkOutput(t, got, "Globex Ltd")

	var evs struct {
		Events []acpEvent `json:"events"`
	}
	acpDo(t, ctx, "GET", a.URL+"/runs/"+r.RunID+"/events", "", &evs)
	if got := eventTypes(evs.Events); got != "run.created run.in-progress message.created message.part message.part message.completed run.completed" {
		t.Fatalf("events %s", got)
	}

	var seen bool
	for _, o := range a.Requests() {
		if o.Method == "POST /runs" {
			seen = o.TaskID == r.RunID && o.Caller == "acp-caller" && strings.Contains(o.Body, "Globex Ltd")
		}
	}
	if !seen {
		t.Fatalf("requests %+v", a.Requests())
	}
}

func eventTypes(evs []acpEvent) string {
	var b []string
	for _, e := range evs {
		b = append(b, e.Type)
	}
	return strings.Join(b, " ")
}

func TestACPAsyncRun(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartACP)
	var r acpRun
	if resp := acpDo(t, ctx, "POST", a.URL+"/runs", runBody("async", "Globex Ltd"), &r); resp.StatusCode != 202 || r.Status != "created" {
		t.Fatalf("async: %d %+v", resp.StatusCode, r)
	}
	// Poll until it completes.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var got acpRun
		acpDo(t, ctx, "GET", a.URL+"/runs/"+r.RunID, "", &got)
		if got.Status == "completed" {
			checkOutput(t, got, "Globex Ltd")
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("run still %s", got.Status)
		}
	}
}

func TestACPStreamRun(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartACP)
	req, _ := http.NewRequestWithContext(ctx, "POST", a.URL+"/runs", strings.NewReader(runBody("stream", "Globex Ltd")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var evs []acpEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e acpEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	if got := eventTypes(evs); got != "run.created run.in-progress message.created message.part message.part message.completed run.completed" {
		t.Fatalf("events %s", got)
	}
	checkOutput(t, *evs[len(evs)-1].Run, "Globex Ltd")
	if evs[0].Run.Status != "created" || evs[1].Run.Status != "in-progress" {
		t.Fatalf("first events %+v %+v", evs[0].Run, evs[1].Run)
	}
}

func TestACPCancel(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartACP, WithDelay(time.Minute))
	var r acpRun
	acpDo(t, ctx, "POST", a.URL+"/runs", runBody("async", "Globex Ltd"), &r)
	var c acpRun
	if resp := acpDo(t, ctx, "POST", a.URL+"/runs/"+r.RunID+"/cancel", "", &c); resp.StatusCode != 202 || c.Status != "cancelled" || c.FinishedAt == nil {
		t.Fatalf("cancel: %d %+v", resp.StatusCode, c)
	}
	var e acpError
	if resp := acpDo(t, ctx, "POST", a.URL+"/runs/"+r.RunID+"/cancel", "", &e); resp.StatusCode != 403 || e.Code != "invalid_input" ||
		e.Message != "Run in terminal status cancelled can't be cancelled" {
		t.Fatalf("cancel again: %d %+v", resp.StatusCode, e)
	}
	var evs struct {
		Events []acpEvent `json:"events"`
	}
	acpDo(t, ctx, "GET", a.URL+"/runs/"+r.RunID+"/events", "", &evs)
	if got := eventTypes(evs.Events); got != "run.created run.in-progress run.cancelled" &&
		got != "run.created run.cancelled" {
		t.Fatalf("events %s", got)
	}
	if resp := acpDo(t, ctx, "POST", a.URL+"/runs/"+r.RunID, `{"run_id":"`+r.RunID+`","await_resume":{},"mode":"sync"}`, &e); resp.StatusCode != 403 {
		t.Fatalf("resume: %d %+v", resp.StatusCode, e)
	}
}

func TestACPErrors(t *testing.T) {
	ctx := testCtx(t)
	a := startAgent(t, StartACP)
	const unknown = "00000000-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/runs/" + unknown, "", 404, "not_found"},
		{"GET", "/runs/" + unknown + "/events", "", 404, "not_found"},
		{"POST", "/runs/" + unknown + "/cancel", "", 404, "not_found"},
		{"POST", "/runs", `{"agent_name":`, 400, "invalid_input"},
		{"POST", "/runs", `{"input":[]}`, 422, "invalid_input"},
		{"POST", "/runs", `{"agent_name":"kyc-refresh-agent","input":[],"mode":"turbo"}`, 422, "invalid_input"},
		{"POST", "/runs", `{"agent_name":"kyc-refresh-agent","input":[{"role":"assistant","parts":[]}]}`, 422, "invalid_input"},
		{"POST", "/runs", `{"agent_name":"nobody","input":[]}`, 404, "not_found"},
		{"POST", "/runs/x/pause", "", 404, "not_found"},
	} {
		var e acpError
		resp := acpDo(t, ctx, tc.method, a.URL+tc.path, tc.body, &e)
		if resp.StatusCode != tc.status || e.Code != tc.code || e.Message == "" {
			t.Errorf("%s %s %s: %d %+v, want %d %s", tc.method, tc.path, tc.body, resp.StatusCode, e, tc.status, tc.code)
		}
	}
}

func TestACPRunLimit(t *testing.T) {
	s := &acpServer{a: &Agent{}, delay: time.Hour, life: t.Context(), max: 2, runs: make(map[string]*run)}
	first, _, ok := s.newRun("s", "c")
	if !ok {
		t.Fatal("first run refused")
	}
	if _, _, ok := s.newRun("s", "c"); !ok {
		t.Fatal("second run refused")
	}
	if _, _, ok := s.newRun("s", "c"); ok {
		t.Fatal("third run accepted while two are active")
	}
	first.cancel()
	<-first.done
	if _, _, ok := s.newRun("s", "c"); !ok {
		t.Fatal("run refused after one finished")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.runs) != 2 || s.runs[first.r.RunID] != nil {
		t.Fatalf("%d runs kept, first kept: %v", len(s.runs), s.runs[first.r.RunID] != nil)
	}
}
