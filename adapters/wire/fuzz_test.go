package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/writ-authz/writ/adapters/wire"
)

type sseResult struct {
	evs []wire.SSEEvent
	err error // nil for a clean io.EOF
}

func drainSSE(t *testing.T, r io.Reader, inputLen, max int) sseResult {
	sr := wire.NewSSEReader(r, max)
	var res sseResult
	// Every event consumes at least one input byte, so more than inputLen+1
	// calls means the reader does not terminate.
	for calls := 0; ; calls++ {
		if calls > inputLen+1 {
			t.Fatalf("no end after %d calls on %d bytes", calls, inputLen)
		}
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			res.err = err
			return res
		}
		res.evs = append(res.evs, ev)
	}
}

func FuzzSSEReader(f *testing.F) {
	seeds := []string{
		"",
		"\n",
		"data: hello\n\n",
		": keep-alive\n\n",
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"task\",\"id\":\"t1\",\"contextId\":\"c1\",\"status\":{\"state\":\"submitted\"}}}\n\n" +
			": ping\n\n" +
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"status-update\",\"taskId\":\"t1\",\"status\":{\"state\":\"working\"},\"final\":false}}\n\n" +
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"artifact-update\",\"taskId\":\"t1\",\"artifact\":{\"artifactId\":\"a\",\"parts\":[{\"kind\":\"text\",\"text\":\"hi\"}]},\"lastChunk\":true}}\n\n" +
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"status-update\",\"taskId\":\"t1\",\"status\":{\"state\":\"completed\"},\"final\":true}}\n\n",
		"id: 1\r\nevent: status\r\ndata: {\"statusUpdate\":{\"taskId\":\"t1\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}\r\n\r\n" +
			"id: 2\r\ndata: {\"error\":{\"code\":-32603,\"message\":\"boom\"}}\r\n\r\n",
		"id: 7\ndata: a\ndata: b\n\n\n\n: c\nid: 8\n\ndata: tail",
		"retry: 1000\n\ndata\n\ndata:\n\n:\n\nfoo: bar\n",
		"\r\n\r\n\n: x\r\n\r\ndata: y\r\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"error\":{\"code\":-32001,\"message\":\"Task not found\"}}\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint16(0))
		f.Add([]byte(s), uint16(24))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		max := int(limit) // 0: the default
		res := drainSSE(t, bytes.NewReader(data), len(data), max)

		var all []byte
		for i, ev := range res.evs {
			if len(ev.Raw) == 0 {
				t.Fatalf("event %d has an empty Raw", i)
			}
			if max > 0 && len(ev.Raw) > max {
				t.Fatalf("event %d Raw is %d bytes, over the %d limit", i, len(ev.Raw), max)
			}
			if !ev.HasData && ev.Data != nil {
				t.Fatalf("event %d has Data %q but no data line", i, ev.Data)
			}
			if ev.HasData && ev.Comment {
				t.Fatalf("event %d is both data and comment", i)
			}
			if ev.HasData && len(ev.Data) >= len(ev.Raw) {
				t.Fatalf("event %d Data (%d bytes) not shorter than Raw (%d)", i, len(ev.Data), len(ev.Raw))
			}
			all = append(all, ev.Raw...)
		}
		if len(all) > len(data) {
			t.Fatalf("Raw totals %d bytes, input is %d", len(all), len(data))
		}
		if !bytes.HasPrefix(data, all) {
			t.Fatalf("Raw concatenation is not a prefix of the input")
		}
		if res.err == nil {
			// On a clean end, only stray blank lines may be left over.
			if rest := data[len(all):]; len(bytes.Trim(rest, "\r\n")) != 0 {
				t.Fatalf("clean EOF left %q unreported", rest)
			}
		} else if !errors.Is(res.err, wire.ErrSSELineTooLong) {
			t.Fatalf("unexpected error %v", res.err)
		}

		// Reading one byte at a time gives the same events.
		slow := drainSSE(t, iotest.OneByteReader(bytes.NewReader(data)), len(data), max)
		if (slow.err == nil) != (res.err == nil) || len(slow.evs) != len(res.evs) {
			t.Fatalf("one-byte reads: %d events, err %v; whole: %d events, err %v", len(slow.evs), slow.err, len(res.evs), res.err)
		}
		for i := range res.evs {
			a, b := res.evs[i], slow.evs[i]
			if !bytes.Equal(a.Raw, b.Raw) || !bytes.Equal(a.Data, b.Data) || a.ID != b.ID || a.Event != b.Event ||
				a.HasData != b.HasData || a.Comment != b.Comment {
				t.Fatalf("event %d differs with one-byte reads: %+v vs %+v", i, a, b)
			}
		}
	})
}

// jsonDepth is the nesting depth of a valid JSON value, counted by the standard
// decoder's tokens rather than by bytes.
func jsonDepth(t *testing.T, data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // 1e1000 is valid JSON but no float64
	depth, top := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return top
		}
		if err != nil {
			t.Fatalf("decoder rejects JSON that json.Valid accepts: %v", err)
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
				top = max(top, depth)
			default:
				depth--
			}
		}
	}
}

func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `1`, `"x"`, `{"a":1,}`, `{} x`, `[[[[[[]]]]]]`, `[[[[[[`, `]]]]{{{{`,
		`{"a":"[[[[\"]]]]","b":[{"c":null}]}`, `["\\",[1]]`, `"\u005b"`, " \t\r\n[1] ",
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi"}],"messageId":"m1"}}}`,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		err := wire.CheckJSON(data, int(limit))
		// Well-formed means JSON and UTF-8 text: anything else is refused.
		valid := json.Valid(data) && utf8.Valid(data)
		if err == nil && !valid {
			t.Fatalf("CheckJSON accepted invalid JSON %q", data)
		}
		if err != nil && !errors.Is(err, wire.ErrTooDeep) && !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, wire.ErrDuplicateKey) {
			t.Fatalf("CheckJSON returned an unclassified error %v", err)
		}
		if errors.Is(err, wire.ErrDuplicateKey) {
			// Well-formed and not too deep, but an object names a key twice:
			// refused (the agents' parsers would read another value than writ).
			if !valid || !wire.DupByTokens(data) {
				t.Fatalf("CheckJSON(%q) reports a duplicate key it does not have: %v", data, err)
			}
			return
		}
		if errors.Is(err, wire.ErrTooDeep) && errors.Is(err, wire.ErrMalformed) {
			t.Fatalf("error is both too deep and malformed: %v", err)
		}
		if !valid {
			if err == nil {
				t.Fatal("unreachable")
			}
			return
		}
		want := int(limit)
		if want == 0 {
			want = wire.DefaultMaxJSONDepth
		}
		depth := jsonDepth(t, data)
		switch {
		case depth <= want && err == nil && wire.DupByTokens(data):
			t.Fatalf("CheckJSON accepted %q, which names a key twice", data)
		case depth <= want && err != nil:
			t.Fatalf("depth %d within limit %d, but CheckJSON(%q) = %v", depth, want, data, err)
		case depth > want && !errors.Is(err, wire.ErrTooDeep):
			t.Fatalf("depth %d over limit %d, but CheckJSON(%q) = %v", depth, want, data, err)
		}
	})
}
