package replay

import (
	"os"
	"strings"
	"testing"
)

// TestReplayProgressLine: the progress line is written only to a terminal
// (a character device), never to a pipe or a buffer, and is cleared at the
// end.
func TestReplayProgressLine(t *testing.T) {
	var buf strings.Builder
	if NewProgressLine(&buf) != nil {
		t.Error("a progress line on a buffer")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if NewProgressLine(w) != nil {
		t.Error("a progress line on a pipe")
	}
	tty, err := os.OpenFile("/dev/zero", os.O_WRONLY, 0) // a character device, as a terminal is
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if NewProgressLine(tty) == nil {
		t.Fatal("no progress line on a character device")
	}
	p := &ProgressLine{w: &buf}
	p.Show(Progress{Lines: 2048, Replayed: 2000, Flips: 3})
	p.Done()
	if got := buf.String(); !strings.HasPrefix(got, "\r2048 lines, 2000 decisions replayed (") || !strings.HasSuffix(got, "3 flipped \r\033[K") {
		t.Errorf("progress %q", got)
	}
}
