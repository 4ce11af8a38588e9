package decisionlog

import (
	"fmt"
	"io"
	"strings"
)

// Print writes what Verify found as `writ report -verify` shows it: one
// "ok:" line per sequence that verified (its lines, checkpoints, the last
// one, its signatures and its files in chain order) with its notes, a
// "FAIL:" line for a sequence that does not end with writ's closing
// checkpoint when closed asks for one, and the first line that does not
// verify. keysChecked says the checkpoints' signatures were checked against
// keys. It reports whether everything verified.
func (v *Verification) Print(w io.Writer, keysChecked, closed bool) bool {
	ok := true
	for _, s := range v.Sequences {
		if s.Failed {
			continue
		}
		fmt.Fprintf(w, "ok: %d lines, %d checkpoints%s; %s; files: %s\n", s.Lines, s.Checkpoints, s.lastCheckpoint(),
			s.signatures(keysChecked), strings.Join(s.Files, ", "))
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		if closed && !s.Closed {
			fmt.Fprintf(w, "FAIL: %s: the log does not end with writ's closing checkpoint (-closed)\n", s.Files[len(s.Files)-1])
			ok = false
		}
	}
	if v.Failure != nil {
		fmt.Fprintf(w, "FAIL: %s: %s\n", v.Failure.Position, v.Failure.Reason)
		return false
	}
	return ok
}

func (s Sequence) lastCheckpoint() string {
	if s.LastCheckpointAt == 0 {
		return ""
	}
	return fmt.Sprintf(", last checkpoint at line %d (%s)", s.LastCheckpointAt, s.LastCheckpoint)
}

func (s Sequence) signatures(checked bool) string {
	switch {
	case s.Checkpoints == 0:
		return "no checkpoint"
	case checked:
		return fmt.Sprintf("%d signatures verified", s.Signed)
	case s.Signed > 0:
		return "signatures not checked (no -key)"
	}
	return "checkpoints unsigned"
}
