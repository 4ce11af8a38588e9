package proxy_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/proxytest"
	"github.com/writ-authz/writ/proxy"
)

// relayed feeds chunks to p's relay as a door shown the answer in chunks
// does (the last with end of stream) and returns what it passed on, chunk by
// chunk.
func relayed(ctx context.Context, p *proxy.Plan, chunks [][]byte) [][]byte {
	c := p.Chunks(ctx)
	defer c.Abort()
	out := make([][]byte, len(chunks))
	for i, chunk := range chunks {
		out[i] = c.Feed(chunk, i == len(chunks)-1)
	}
	return out
}

// TestRelayAnySplit: whatever the chunk boundaries — inside a field, between
// CR and LF, several events at once, empty chunks — the relay passes on the
// same bytes as for the whole stream at once, each event only once it is
// complete, and never hangs.
func TestRelayAnySplit(t *testing.T) {
	h := proxytest.New(t, []config.Agent{proxytest.SanctionsAgent("http://127.0.0.1:1")}, nil)
	body := []byte(": keep-alive\n\n" +
		"id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t-r\",\"contextId\":\"c-r\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}}\r\n\r\n" +
		"data: not json\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"artifactUpdate\":{\"taskId\":\"t-r\",\"contextId\":\"c-r\",\"artifact\":{\"artifactId\":\"a-1\",\"name\":\"report\",\"parts\":[{\"text\":\"ok\"}]}}}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"statusUpdate\":{\"taskId\":\"t-r\",\"contextId\":\"c-r\",\"status\":{\"state\":\"TASK_STATE_COMPLETED\"}}}}")
	plan := func() *proxy.Plan {
		raw := `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"x"}]}}}`
		out := h.Core.Admit(t.Context(), proxy.Incoming{Method: "POST", Path: "/", Query: url.Values{},
			Host: "writ.test", Header: http.Header{"Authorization": {"Bearer " + h.Token(proxytest.Investigator)},
				"Content-Type": {"application/json"}, "A2a-Version": {"1.0"}}, Body: []byte(raw)})
		if out.Kind != proxy.Forward {
			t.Fatalf("%s: %s", out.Kind, out.Answer.Body)
		}
		return out.Plan
	}
	whole := bytes.Join(relayed(t.Context(), plan(), [][]byte{body}), nil)
	if !strings.Contains(string(whole), "statusUpdate") || strings.Contains(string(whole), "not json") {
		t.Fatalf("whole: %s", whole)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		var chunks [][]byte
		for rest := body; len(rest) > 0; {
			n := min(len(rest), rng.IntN(40))
			if rng.IntN(10) == 0 {
				n = min(len(rest), rng.IntN(400))
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		out := relayed(ctx, plan(), append(chunks, nil))
		cancel()
		if got := bytes.Join(out, nil); !bytes.Equal(got, whole) {
			t.Fatalf("split %d (%d chunks): passed on\n%q\nwhole\n%q", i, len(chunks), got, whole)
		}
		// Nothing is passed on before the event is complete: every output
		// chunk ends at an event's end.
		for j, o := range out {
			if len(o) > 0 && !bytes.HasSuffix(o, []byte("\n\n")) && !bytes.HasSuffix(o, []byte("\r\n\r\n")) && j != len(out)-1 {
				t.Fatalf("split %d: chunk %d passes on part of an event: %q", i, j, o)
			}
		}
	}
}
