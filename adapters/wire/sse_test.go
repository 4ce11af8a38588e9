package wire_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/writ-authz/writ/adapters/wire"
)

// readAllSSE reads every event of input and the error that ended the stream
// (nil when it ended with io.EOF).
func readAllSSE(t *testing.T, r io.Reader, max int) ([]wire.SSEEvent, error) {
	t.Helper()
	sr := wire.NewSSEReader(r, max)
	var evs []wire.SSEEvent
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("SSEReader does not terminate")
		}
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			// EOF is sticky.
			if _, err2 := sr.Next(); !errors.Is(err2, io.EOF) {
				t.Errorf("Next after EOF = %v, want io.EOF", err2)
			}
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

type wantEv struct {
	id, event, data  string
	hasData, comment bool
	raw              string
}

func TestSSEReader(t *testing.T) {
	a2aStatus := `{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working"},"final":false}}`
	a2aArtifact := `{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t1","artifact":{"artifactId":"a1","parts":[{"kind":"text","text":"hello"}]}}}`
	tests := []struct {
		name  string
		input string
		want  []wantEv
	}{
		{"empty", "", nil},
		{"only blank lines", "\n\n\r\n\n", nil},
		{"one data line", "data: hello\n\n", []wantEv{{data: "hello", hasData: true, raw: "data: hello\n\n"}}},
		{"multi-line data joined with LF", "data: a\ndata: b\ndata:c\n\n",
			[]wantEv{{data: "a\nb\nc", hasData: true, raw: "data: a\ndata: b\ndata:c\n\n"}}},
		{"only one leading space stripped", "data:  two\ndata:\ttab\n\n",
			[]wantEv{{data: " two\n\ttab", hasData: true, raw: "data:  two\ndata:\ttab\n\n"}}},
		{"colon in value", "data: {\"a\":\"b:c\"}\n\n",
			[]wantEv{{data: `{"a":"b:c"}`, hasData: true, raw: "data: {\"a\":\"b:c\"}\n\n"}}},
		{"empty data lines", "data\ndata:\n\n",
			[]wantEv{{data: "\n", hasData: true, raw: "data\ndata:\n\n"}}},
		{"id and event", "id: 42\nevent: status-update\ndata: " + a2aStatus + "\n\n",
			[]wantEv{{id: "42", event: "status-update", data: a2aStatus, hasData: true,
				raw: "id: 42\nevent: status-update\ndata: " + a2aStatus + "\n\n"}}},
		{"later id wins", "id: 1\nid: 2\ndata: x\n\n",
			[]wantEv{{id: "2", data: "x", hasData: true, raw: "id: 1\nid: 2\ndata: x\n\n"}}},
		{"id without data", "id: 9\n\n", []wantEv{{id: "9", raw: "id: 9\n\n"}}},
		{"unknown field only", "retry: 3000\n\n", []wantEv{{raw: "retry: 3000\n\n"}}},
		{"comment only", ": keep-alive\n\n", []wantEv{{comment: true, raw: ": keep-alive\n\n"}}},
		{"bare colon comment", ":\n\n", []wantEv{{comment: true, raw: ":\n\n"}}},
		{"several comment lines", ": a\n: b\n\n", []wantEv{{comment: true, raw: ": a\n: b\n\n"}}},
		{"comment then data is not a comment", ": hi\ndata: x\n\n",
			[]wantEv{{data: "x", hasData: true, raw: ": hi\ndata: x\n\n"}}},
		{"data then comment is not a comment", "data: x\n: hi\n\n",
			[]wantEv{{data: "x", hasData: true, raw: "data: x\n: hi\n\n"}}},
		{"comment then id is not a comment", ": ping\nid: 7\n\n",
			[]wantEv{{id: "7", raw: ": ping\nid: 7\n\n"}}},
		{"comment then event is not a comment", ": ping\nevent: close\n\n",
			[]wantEv{{event: "close", raw: ": ping\nevent: close\n\n"}}},
		{"comments between events", ": open\n\ndata: 1\n\n: ping\n\ndata: 2\n\n", []wantEv{
			{comment: true, raw: ": open\n\n"},
			{data: "1", hasData: true, raw: "data: 1\n\n"},
			{comment: true, raw: ": ping\n\n"},
			{data: "2", hasData: true, raw: "data: 2\n\n"},
		}},
		{"CRLF line ends", "id: 1\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\n: ka\r\n\r\n", []wantEv{
			{id: "1", event: "message", data: "a\nb", hasData: true, raw: "id: 1\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\n"},
			{comment: true, raw: ": ka\r\n\r\n"},
		}},
		{"final block without blank line", "data: a\n\ndata: b", []wantEv{
			{data: "a", hasData: true, raw: "data: a\n\n"},
			{data: "b", hasData: true, raw: "data: b"},
		}},
		{"final block ended by a single LF", "data: a\n\nid: 3\ndata: b\n", []wantEv{
			{data: "a", hasData: true, raw: "data: a\n\n"},
			{id: "3", data: "b", hasData: true, raw: "id: 3\ndata: b\n"},
		}},
		{"final comment without blank line", "data: a\n\n: bye", []wantEv{
			{data: "a", hasData: true, raw: "data: a\n\n"},
			{comment: true, raw: ": bye"},
		}},
		{"stray blank lines belong to the next block", "\n\ndata: a\n\n\n\r\ndata: b\n\n", []wantEv{
			{data: "a", hasData: true, raw: "\n\ndata: a\n\n"},
			{data: "b", hasData: true, raw: "\n\r\ndata: b\n\n"},
		}},
		{"A2A JSON-RPC stream", "event: message\ndata: " + a2aStatus + "\n\n: keep-alive\n\nevent: message\ndata: " + a2aArtifact + "\n\n", []wantEv{
			{event: "message", data: a2aStatus, hasData: true, raw: "event: message\ndata: " + a2aStatus + "\n\n"},
			{comment: true, raw: ": keep-alive\n\n"},
			{event: "message", data: a2aArtifact, hasData: true, raw: "event: message\ndata: " + a2aArtifact + "\n\n"},
		}},
	}
	for _, tt := range tests {
		for _, mode := range []string{"whole", "one byte"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tt.input)
				if mode == "one byte" {
					r = iotest.OneByteReader(r)
				}
				evs, err := readAllSSE(t, r, 0)
				if err != nil {
					t.Fatalf("stream error: %v", err)
				}
				if len(evs) != len(tt.want) {
					t.Fatalf("%d events, want %d: %+v", len(evs), len(tt.want), evs)
				}
				for i, w := range tt.want {
					ev := evs[i]
					if ev.ID != w.id || ev.Event != w.event || ev.HasData != w.hasData || ev.Comment != w.comment {
						t.Errorf("event %d: id=%q event=%q hasData=%v comment=%v; want id=%q event=%q hasData=%v comment=%v",
							i, ev.ID, ev.Event, ev.HasData, ev.Comment, w.id, w.event, w.hasData, w.comment)
					}
					if string(ev.Data) != w.data {
						t.Errorf("event %d: Data = %q, want %q", i, ev.Data, w.data)
					}
					if !w.hasData && ev.Data != nil {
						t.Errorf("event %d: Data = %q without data lines", i, ev.Data)
					}
					if string(ev.Raw) != w.raw {
						t.Errorf("event %d: Raw = %q, want %q", i, ev.Raw, w.raw)
					}
				}
			})
		}
	}
}

func TestSSERawReproducesInput(t *testing.T) {
	inputs := []string{
		"data: a\n\n",
		"\n\n: hello\n\nid: 1\nevent: e\ndata: x\ndata: y\n\n\n\ndata: z\n\n",
		"id: 1\r\ndata: a\r\n\r\n\r\n: c\r\n\r\ndata: b\r\n\r\n",
		"data: mixed\r\n: c\ndata: ends\n\r\n",
		"retry: 10\n\nfoo\n\nbar: baz\n\n",
		"data: " + strings.Repeat("é", 20000) + "\n\n" + ": k\n\n",
		"data: a\n\ndata: b", // ends without a blank line: still reproduced
	}
	for _, in := range inputs {
		evs, err := readAllSSE(t, strings.NewReader(in), 0)
		if err != nil {
			t.Fatalf("%.40q: %v", in, err)
		}
		var all bytes.Buffer
		for _, ev := range evs {
			if len(ev.Raw) == 0 {
				t.Errorf("%.40q: event with empty Raw", in)
			}
			all.Write(ev.Raw)
		}
		if all.String() != in {
			t.Errorf("Raw concatenation differs:\n got %.80q\nwant %.80q", all.String(), in)
		}
	}
}

func TestSSELimits(t *testing.T) {
	const max = 32
	exact := "data: " + strings.Repeat("x", max-8) + "\n\n" // 6 + 24 + 2 = 32
	if len(exact) != max {
		t.Fatalf("test setup: %d", len(exact))
	}
	tests := []struct {
		name    string
		input   string
		okFirst int // events read before the error
		tooLong bool
	}{
		{"event exactly at the limit", exact, 1, false},
		{"event one byte over", "data: " + strings.Repeat("x", max-7) + "\n\n", 0, true},
		{"one line over", "data: " + strings.Repeat("x", 100) + "\n\n", 0, true},
		{"one line over, no newline", "data: " + strings.Repeat("x", 100), 0, true},
		{"many short lines over", strings.Repeat("data: 1\n", 5) + "\n", 0, true},
		{"many comment lines over", strings.Repeat(": 1\n", 10) + "\n", 0, true},
		{"stray blank lines count", strings.Repeat("\n", 40) + "data: x\n\n", 0, true},
		{"second event over", "data: ok\n\n" + strings.Repeat("data: 22\n", 4) + "\n", 1, true},
		{"many events each under", strings.Repeat("data: 0123456789\n\n", 50), 50, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := readAllSSE(t, strings.NewReader(tt.input), max)
			if len(evs) != tt.okFirst {
				t.Errorf("%d events before the end, want %d", len(evs), tt.okFirst)
			}
			if tt.tooLong {
				if !errors.Is(err, wire.ErrSSELineTooLong) {
					t.Fatalf("err = %v, want ErrSSELineTooLong", err)
				}
				if !strings.Contains(err.Error(), "(32 bytes)") {
					t.Errorf("err %q does not name the limit", err)
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestSSELongLine(t *testing.T) {
	// Longer than the reader's 16 KiB buffer, well under the limit.
	payload := strings.Repeat("0123456789abcdef", 5000) // 80000 bytes
	in := "id: big\ndata: " + payload + "\ndata: tail\n\ndata: next\n\n"
	for _, max := range []int{0, 100000} {
		evs, err := readAllSSE(t, strings.NewReader(in), max)
		if err != nil {
			t.Fatalf("max %d: %v", max, err)
		}
		if len(evs) != 2 {
			t.Fatalf("max %d: %d events", max, len(evs))
		}
		if string(evs[0].Data) != payload+"\ntail" || evs[0].ID != "big" {
			t.Errorf("max %d: Data is %d bytes, id %q", max, len(evs[0].Data), evs[0].ID)
		}
		if string(evs[1].Data) != "next" {
			t.Errorf("max %d: second Data = %q", max, evs[1].Data)
		}
		if string(evs[0].Raw)+string(evs[1].Raw) != in {
			t.Errorf("max %d: Raw does not reproduce the input", max)
		}
	}
	// The same line, just over a limit that is above the buffer size.
	_, err := readAllSSE(t, strings.NewReader(in), len(payload))
	if !errors.Is(err, wire.ErrSSELineTooLong) {
		t.Errorf("line over a 80000-byte limit: %v", err)
	}
}

func TestSSEReadError(t *testing.T) {
	boom := errors.New("upstream reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	evs, err := readAllSSE(t, r, 0)
	if len(evs) != 1 || string(evs[0].Data) != "a" {
		t.Errorf("events before the error: %+v", evs)
	}
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want the reader's error", err)
	}
}
