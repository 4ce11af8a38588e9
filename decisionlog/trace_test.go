package decisionlog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/internal/syncbuf"
)

// TestDecisionLinesCarryTheTrace: a decision made while tracing is on
// names its span in both formats — the writ line's trace_id and span_id
// beside decision_id, OPA's own EventV1 trace_id and span_id — and a
// decision without one has neither key.
func TestDecisionLinesCarryTheTrace(t *testing.T) {
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, format := range []string{"writ", "opa"} {
		var buf syncbuf.Buffer
		l := mustWriter(t, &buf, config.DecisionLog{Format: format}, options{now: fixedNow})
		traced := allowEvent()
		traced.TraceID, traced.SpanID = traceID, spanID
		l.Decided(traced)
		l.Decided(allowEvent())
		closeLog(t, l)
		lines := eventLines(buf.String())
		if len(lines) != 2 {
			t.Fatalf("%s: %d lines", format, len(lines))
		}
		if format == "writ" && !strings.HasPrefix(lines[0], `{"time":`+t0JSON+`,"type":"decision","decision_id":"dec-1","trace_id":"`+traceID+`","span_id":"`+spanID+`",`) {
			t.Errorf("writ line: %s", lines[0])
		}
		for i, line := range lines {
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			var got struct {
				TraceID string `json:"trace_id"`
				SpanID  string `json:"span_id"`
			}
			var err error
			if format == "opa" {
				var ev opaEventV1
				err = dec.Decode(&ev)
				got.TraceID, got.SpanID = ev.TraceID, ev.SpanID
			} else {
				var ln Line
				err = dec.Decode(&ln)
				got.TraceID, got.SpanID = ln.TraceID, ln.SpanID
			}
			if err != nil {
				t.Fatalf("%s line %d: %v", format, i, err)
			}
			want := [2]string{traceID, spanID}
			if i == 1 {
				want = [2]string{}
			}
			if [2]string{got.TraceID, got.SpanID} != want {
				t.Errorf("%s line %d: trace %q span %q, want %v", format, i, got.TraceID, got.SpanID, want)
			}
		}
	}
}
