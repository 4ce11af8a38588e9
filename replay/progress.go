package replay

import (
	"fmt"
	"io"
	"os"
	"time"
)

// ProgressLine rewrites one line on a terminal with how far a replay is.
type ProgressLine struct {
	w     io.Writer
	start time.Time
	last  time.Time
	shown bool
}

// NewProgressLine is a progress line on w when w is a terminal (a
// character device), else nil: a log or a pipe gets no carriage returns.
func NewProgressLine(w io.Writer) *ProgressLine {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &ProgressLine{w: w, start: time.Now()}
}

// Show rewrites the line with pr, at most five times a second; it fits
// Options.Progress.
func (p *ProgressLine) Show(pr Progress) {
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last, p.shown = now, true
	rate := float64(pr.Replayed) / max(now.Sub(p.start).Seconds(), 1e-3)
	fmt.Fprintf(p.w, "\r%d lines, %d decisions replayed (%.0f/s), %d flipped ", pr.Lines, pr.Replayed, rate, pr.Flips)
}

// Done clears the line, when one was shown (a nil line does nothing).
func (p *ProgressLine) Done() {
	if p != nil && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
