package decisionlog

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	enchex "encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Position is a line of a file, 1-based.
type Position struct {
	File string
	Line int
}

// String is "file:line".
func (p Position) String() string { return p.File + ":" + strconv.Itoa(p.Line) }

// Failure is the first line that does not verify, and why.
type Failure struct {
	Position
	Reason string
}

// Error is "file:line: reason".
func (f *Failure) Error() string { return f.Position.String() + ": " + f.Reason }

// Sequence is one log's files, in the order their chain runs (oldest first),
// and what verifying them found.
type Sequence struct {
	Files []string
	// Lines counts the lines verified; Logs the writer runs (log ids) among
	// them, in order.
	Lines int
	Logs  []string
	// Checkpoints counts the checkpoint lines, Signed those whose signature
	// verified (with keys given) or that carry one (without).
	Checkpoints, Signed int
	// LastCheckpoint is the last checkpoint's place (Line 0: there is none),
	// LastCheckpointAt its number among the sequence's lines; After counts
	// the lines after it, which no checkpoint covers.
	LastCheckpoint   Position
	LastCheckpointAt int
	After            int
	// Closed: the last line is writ's closing checkpoint.
	Closed bool
	// Failed: the Verification's Failure is in this sequence (its lines
	// after the failure were not checked).
	Failed bool
	// Notes say what was not or could not be verified (the start of a log
	// whose earlier files are not given, lines before writ chained its log,
	// signatures not checked).
	Notes []string

	// Where the sequence starts in the middle of a log (firstSeq > 0) and
	// where it ends, to find a file missing between two sequences.
	firstLog, lastLog string
	firstSeq, lastSeq uint64
	firstPos          Position
}

// Verification is what Verify found: the sequences it checked, and the
// first line that does not verify (nil when every line does).
type Verification struct {
	Sequences []Sequence
	Failure   *Failure
}

// OK reports whether every line verified.
func (v *Verification) OK() bool { return v.Failure == nil }

// lookahead is how many following lines Verify reads to tell why a line
// does not verify (a line moved later is found within it).
const lookahead = 64

// Verify checks the decision log files named: each line's seq and prev
// against the line before it, across rotated files, and every checkpoint
// (its signature with keys, which may be nil). The files may be given in any
// order and may belong to several logs: they are put in order by the chain
// itself (a file's first line names the digest of the last line of the file
// it continues). It returns an error only when a file cannot be read; a line
// that does not verify is the Verification's Failure, the first one found.
//
// What it detects: a line edited (any byte), deleted, inserted, reordered or
// duplicated; lines missing before a file's first line; a checkpoint whose
// signature does not verify or that does not sign the chain as it is (a
// rewrite of the lines before it), and, with keys, an unsigned one. What it
// cannot: lines removed from the end of a log after its last checkpoint (or
// a whole last file), and an edit of a log's very last line when it is not
// a checkpoint; a log rewritten whole by whoever holds the signing key.
// Sequence.After and Sequence.Closed say how much of a log that leaves open.
func Verify(paths []string, keys *Keys) (*Verification, error) {
	files, err := openAll(paths)
	defer func() {
		for _, f := range files {
			f.f.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	res := &Verification{}
	order, fail := link(files)
	if fail != nil {
		res.Failure = fail
		return res, nil
	}
	for _, seq := range order {
		v := &verifier{keys: keys, seq: &Sequence{}}
		for _, f := range seq {
			v.seq.Files = append(v.seq.Files, f.name)
		}
		fail, err := v.run(seq)
		if err != nil {
			return nil, err
		}
		v.finish()
		v.seq.Failed = fail != nil
		res.Sequences = append(res.Sequences, *v.seq)
		if fail != nil {
			res.Failure = fail
			return res, nil
		}
	}
	res.Failure = gaps(res.Sequences)
	return res, nil
}

// gaps finds a sequence that begins in the middle of a log another sequence
// ends in: the files between them were not given.
func gaps(seqs []Sequence) *Failure {
	for i := range seqs {
		b := &seqs[i]
		if b.firstSeq == 0 {
			continue
		}
		for _, a := range seqs {
			if a.lastLog == b.firstLog && a.lastSeq < b.firstSeq {
				b.Failed = true
				return fail(b.firstPos, "log %s's files do not join: %s ends at seq %d and this file begins at seq %d: the file between them is missing (give it)",
					b.firstLog, a.Files[len(a.Files)-1], a.lastSeq, b.firstSeq)
			}
		}
	}
	return nil
}

// logFile is one file given to Verify.
type logFile struct {
	name  string
	f     *os.File
	size  int64
	first *chainFields // its first line's fields, nil when unreadable
	last  [sha256.Size]byte
	next  *logFile // the file that continues it
	prev  *logFile
}

func openAll(paths []string) ([]*logFile, error) {
	var out []*logFile
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return out, err
		}
		lf := &logFile{name: p, f: f}
		out = append(out, lf)
		st, err := f.Stat()
		if err != nil {
			return out, err
		}
		lf.size = st.Size()
		if lf.size == 0 {
			continue
		}
		first, err := readLine(bufio.NewReader(io.NewSectionReader(f, 0, lf.size)))
		if err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("%s: %w", p, err)
		}
		lf.first, _ = parseChain(first)
		last, err := lastLine(f, lf.size)
		if err != nil {
			return out, fmt.Errorf("%s: %w", p, err)
		}
		lf.last = sha256.Sum256(last)
	}
	return out, nil
}

// link orders the files into sequences: a file follows the one whose last
// line its first line's prev names.
func link(files []*logFile) ([][]*logFile, *Failure) {
	byLast := map[[sha256.Size]byte]*logFile{}
	for _, f := range files {
		if f.size > 0 {
			byLast[f.last] = f
		}
	}
	for _, f := range files {
		if f.first == nil || f.first.prev == nil {
			continue
		}
		p := byLast[*f.first.prev]
		if p == nil || p == f {
			continue
		}
		if p.next != nil {
			return nil, &Failure{Position{f.name, 1}, fmt.Sprintf("continues %s, as %s does: one of them was not written by this log", p.name, p.next.name)}
		}
		p.next, f.prev = f, p
	}
	var out [][]*logFile
	for _, f := range files {
		if f.prev != nil || f.size == 0 {
			continue
		}
		var seq []*logFile
		for g := f; g != nil && len(seq) <= len(files); g = g.next {
			seq = append(seq, g)
		}
		out = append(out, seq)
	}
	return out, nil
}

// chainFields are what Verify reads of a line.
type chainFields struct {
	typ, logID, reason, jws, time, continues string
	seq                                      uint64
	prev                                     *[sha256.Size]byte // nil: the line is not chained
	badPrev                                  bool               // prev is there but no digest
}

type rawChain struct {
	Type      string          `json:"type"`
	LogID     string          `json:"log_id"`
	Reason    string          `json:"reason"`
	JWS       string          `json:"jws"`
	Time      string          `json:"time"`
	Continues string          `json:"continues"`
	Seq       *uint64         `json:"seq"`
	Prev      *string         `json:"prev"`
	Custom    json.RawMessage `json:"custom"`
}

// parseChain reads a line's chain fields; ok is false when it is not a
// JSON object. A decision line in OPA's shape keeps seq and prev in custom.
func parseChain(raw []byte) (*chainFields, bool) {
	var r rawChain
	if err := json.Unmarshal(raw, &r); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return nil, false
	}
	if r.Seq == nil && r.Prev == nil && len(r.Custom) > 0 {
		var c struct {
			Seq  *uint64 `json:"seq"`
			Prev *string `json:"prev"`
		}
		if json.Unmarshal(r.Custom, &c) == nil {
			r.Seq, r.Prev = c.Seq, c.Prev
		}
	}
	f := &chainFields{typ: r.Type, logID: r.LogID, reason: r.Reason, jws: r.JWS, time: r.Time, continues: r.Continues}
	if r.Seq == nil || r.Prev == nil {
		return f, true
	}
	f.seq = *r.Seq
	var d [sha256.Size]byte
	if b, err := enchex.DecodeString(*r.Prev); err != nil || len(b) != sha256.Size || enchex.EncodeToString(b) != *r.Prev {
		f.badPrev = true
	} else {
		copy(d[:], b)
	}
	f.prev = &d
	return f, true
}

// readLine reads one line, its newline included (a last line without one
// is returned as it is), refusing one longer than maxLastLine.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLastLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLastLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && len(line) > 0 && errors.Is(err, io.EOF) {
			return line, nil
		}
		return line, err
	}
}

// line is one line of a sequence.
type line struct {
	raw []byte
	pos Position
	f   *chainFields // nil: not a JSON object
	sum [sha256.Size]byte
}

// lineReader reads a sequence's lines in order, across its files, with room to
// look ahead.
type lineReader struct {
	files []*logFile
	cur   *bufio.Reader
	name  string
	n     int
	ahead []line
}

func (ls *lineReader) read() (*line, error) {
	for {
		if ls.cur == nil {
			if len(ls.files) == 0 {
				return nil, nil
			}
			f := ls.files[0]
			ls.files = ls.files[1:]
			ls.cur = bufio.NewReaderSize(io.NewSectionReader(f.f, 0, f.size), 64<<10)
			ls.name, ls.n = f.name, 0
		}
		raw, err := readLine(ls.cur)
		if errors.Is(err, io.EOF) && len(raw) == 0 {
			ls.cur = nil
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", ls.name, ls.n+1, err)
		}
		ls.n++
		l := &line{raw: raw, pos: Position{ls.name, ls.n}, sum: sha256.Sum256(raw)}
		l.f, _ = parseChain(raw)
		return l, nil
	}
}

func (ls *lineReader) next() (*line, error) {
	if len(ls.ahead) > 0 {
		l := ls.ahead[0]
		ls.ahead = ls.ahead[1:]
		return &l, nil
	}
	return ls.read()
}

// peek returns up to k lines after the one last returned by next.
func (ls *lineReader) peek(k int) ([]line, error) {
	for len(ls.ahead) < k {
		l, err := ls.read()
		if err != nil {
			return nil, err
		}
		if l == nil {
			break
		}
		ls.ahead = append(ls.ahead, *l)
	}
	return ls.ahead[:min(k, len(ls.ahead))], nil
}

// verifier walks one sequence.
type verifier struct {
	keys *Keys
	seq  *Sequence
	ls   *lineReader

	inLog  bool
	logID  string
	want   uint64 // the seq the next line must have
	legacy int    // unchained lines before the first chained one
	// The digests and places of the last two lines.
	prev, prev2       [sha256.Size]byte
	havePrev, haveP2  bool
	prevPos, prev2Pos Position
	lastClose         bool
}

func (v *verifier) run(files []*logFile) (*Failure, error) {
	v.ls = &lineReader{files: files}
	for {
		l, err := v.ls.next()
		if err != nil {
			return nil, err
		}
		if l == nil {
			if !v.inLog && v.legacy > 0 {
				return fail(Position{files[0].name, 1}, "no line carries a chain (seq, prev): written by a writ from before its log was chained, or not a decision log; nothing is verified"), nil
			}
			return nil, nil
		}
		fail, err := v.check(l)
		if err != nil || fail != nil {
			return fail, err
		}
		v.prev2, v.haveP2, v.prev2Pos = v.prev, v.havePrev, v.prevPos
		v.prev, v.havePrev, v.prevPos = l.sum, true, l.pos
		v.seq.Lines++
		if v.inLog {
			v.want = l.f.seq + 1
		}
	}
}

func fail(p Position, format string, args ...any) *Failure {
	return &Failure{Position: p, Reason: fmt.Sprintf(format, args...)}
}

// check verifies one line against the ones before it.
func (v *verifier) check(l *line) (*Failure, error) {
	if l.raw[len(l.raw)-1] != '\n' {
		return fail(l.pos, "the line is incomplete: the file ends without a newline (a write cut short, or the file truncated mid-line)"), nil
	}
	f := l.f
	switch {
	case f == nil && !v.inLog && len(bytes.TrimSpace(l.raw)) == 0:
		v.legacy++ // a blank line before the chain: nothing to verify
		return nil, nil
	case f == nil:
		return fail(l.pos, "not a JSON object: not a line writ wrote, or one edited"), nil
	case f.prev == nil && !v.inLog:
		// Lines before writ chained its log (a file an older writ wrote).
		v.legacy++
		return nil, nil
	case f.prev == nil:
		return fail(l.pos, "the line carries no seq or prev: writ did not write it (inserted), or it was edited"), nil
	case f.badPrev:
		return fail(l.pos, "prev is not a hex SHA-256 digest: the line was edited"), nil
	}
	v.lastClose = false
	if f.typ == TypeLogStarted {
		return v.started(l)
	}
	if !v.inLog {
		if f.typ != TypeLogContinued || v.legacy > 0 {
			return fail(l.pos, "the log does not start here: the lines before this one are missing (deleted), or give the file it continues"), nil
		}
		v.inLog, v.logID, v.want = true, f.logID, f.seq
		v.seq.Logs = append(v.seq.Logs, f.logID)
		v.seq.firstLog, v.seq.firstSeq, v.seq.firstPos = f.logID, f.seq, l.pos
		v.note("%s begins in the middle of log %s (at seq %d): the file it continues (then named %q) is not given, and the lines before are not verified", l.pos.File, f.logID, f.seq, f.continues)
		return v.kind(l)
	}
	if f.seq != v.want || *f.prev != v.prev {
		return v.diagnose(l)
	}
	return v.kind(l)
}

// started checks a log_started line: the start of a fresh log (its prev the
// genesis), or of a run appending to lines before it (its prev theirs).
func (v *verifier) started(l *line) (*Failure, error) {
	f := l.f
	switch {
	case *f.prev == Genesis(f.logID):
		if v.legacy > 0 && !v.inLog {
			return fail(l.pos, "a fresh log starts here, but %d line(s) before it are not chained to it: they were put before the log", v.legacy), nil
		}
	case v.havePrev && *f.prev == v.prev:
		if v.legacy > 0 && !v.inLog {
			v.note("the %d line(s) before %s carry no chain (written before writ chained its log): they are not verified", v.legacy, l.pos)
		}
	case !v.havePrev:
		return fail(l.pos, "a run of the log started here after lines that are missing: they were deleted, or give the file they are in"), nil
	default:
		return v.diagnose(l)
	}
	if f.seq != 1 {
		return fail(l.pos, "a log's first line with seq %d, not 1: the line was edited", f.seq), nil
	}
	if v.inLog {
		v.endLog()
	}
	v.inLog, v.logID, v.want = true, f.logID, 1
	v.seq.Logs = append(v.seq.Logs, f.logID)
	return nil, nil
}

// endLog notes a log that ends without its closing checkpoint, where the
// next run starts.
func (v *verifier) endLog() {
	if v.seq.Lines > 0 && !v.lastClose {
		v.note("log %s ends at %s without its closing checkpoint (writ was stopped without closing it, or lines after it were removed)", v.logID, v.prevPos)
	}
}

// kind checks what a line's type asks beyond the chain.
func (v *verifier) kind(l *line) (*Failure, error) {
	f := l.f
	switch f.typ {
	case TypeLogContinued:
		if f.logID != v.logID {
			return fail(l.pos, "continues log %s, but the lines before it are log %s's", f.logID, v.logID), nil
		}
	case TypeCheckpoint:
		return v.checkpoint(l), nil
	}
	return nil, nil
}

func (v *verifier) checkpoint(l *line) *Failure {
	f := l.f
	if f.logID != v.logID {
		return fail(l.pos, "a checkpoint of log %s among log %s's lines: the line was moved or edited", f.logID, v.logID)
	}
	v.seq.Checkpoints++
	v.seq.LastCheckpoint, v.seq.LastCheckpointAt = l.pos, v.seq.Lines+1
	v.lastClose = f.reason == CheckpointClose
	if v.keys == nil {
		if f.jws != "" {
			v.seq.Signed++
		}
		return nil
	}
	if f.jws == "" {
		return fail(l.pos, "the checkpoint is not signed: a key was given, and a log rewritten by someone without it looks like this")
	}
	payload, err := v.keys.verify(f.jws)
	if err != nil {
		return fail(l.pos, "the checkpoint's signature does not verify: %v", err)
	}
	p, ok := parseChain(payload)
	if !ok || p.prev == nil || p.badPrev {
		return fail(l.pos, "the checkpoint's signed payload is not a checkpoint's")
	}
	switch {
	case *p.prev != *f.prev:
		return fail(l.pos, "the checkpoint signs another digest than the chain's: the lines before it were rewritten")
	case p.seq != f.seq || p.logID != f.logID || p.reason != f.reason || p.time != f.time:
		return fail(l.pos, "the checkpoint's fields are not the ones it signs (seq %d, log %s): the line was edited", p.seq, p.logID)
	}
	v.seq.Signed++
	return nil
}

// diagnose says why a line does not follow the one before it, naming the
// line at fault.
func (v *verifier) diagnose(l *line) (*Failure, error) {
	f := l.f
	got, want := f.seq, v.want
	next, err := v.ls.peek(lookahead)
	if err != nil {
		return nil, err
	}
	var n1 *line
	if len(next) > 0 {
		n1 = &next[0]
	}
	linksBack := func(x *line) bool { return x != nil && x.f != nil && x.f.prev != nil && *x.f.prev == v.prev }
	switch {
	case *f.prev == v.prev:
		if linksBack(n1) {
			return fail(l.pos, "inserted: the line after it links to the line before it"), nil
		}
		return fail(l.pos, "seq %d where %d follows %d: the line was edited", got, want, want-1), nil
	case v.haveP2 && *f.prev == v.prev2:
		return fail(v.prevPos, "inserted: the line after it (%s) links to the line before it", l.pos), nil
	}
	for i := range next {
		if next[i].sum == *f.prev {
			return fail(l.pos, "reordered: it belongs after %s, the line it links to", next[i].pos), nil
		}
	}
	switch {
	case linksBack(n1):
		return fail(l.pos, "inserted: the line after it links to the line before it"), nil
	case got == want && n1 == nil:
		return fail(v.prevPos, "edited: its digest is not the one the next line (%s, the last) records, or that line's prev was", l.pos), nil
	case got == want && n1.f != nil && n1.f.prev != nil && *n1.f.prev == l.sum:
		return fail(v.prevPos, "edited: its digest is not the one the next line (%s) records", l.pos), nil
	case got == want:
		return fail(l.pos, "edited: it does not link to the line before it, nor does the line after it link to it"), nil
	case got > want:
		return fail(l.pos, "%d line(s) missing before it: seq jumps from %d to %d (deleted)", got-want, want-1, got), nil
	}
	return fail(l.pos, "seq %d again after seq %d: a copy of an earlier line, or a line inserted", got, want-1), nil
}

func (v *verifier) note(format string, args ...any) {
	v.seq.Notes = append(v.seq.Notes, fmt.Sprintf(format, args...))
}

// finish notes what the end of the sequence leaves open.
func (v *verifier) finish() {
	s := v.seq
	if v.inLog {
		s.lastLog, s.lastSeq = v.logID, v.want-1
	}
	if s.LastCheckpointAt > 0 {
		s.After = s.Lines - s.LastCheckpointAt
	} else {
		s.After = s.Lines
	}
	s.Closed = v.lastClose && s.After == 0
	switch {
	case s.Lines == 0:
	case s.Checkpoints == 0:
		v.note("no checkpoint: the %d line(s) are chained but no checkpoint covers them, so lines removed from the end could not be detected", s.Lines)
	case s.After > 0:
		v.note("%d line(s) after the last checkpoint (%s) are chained but no checkpoint covers them: lines removed from the end could not be detected", s.After, s.LastCheckpoint)
	case !s.Closed:
		v.note("the log ends at a checkpoint that is not its closing one: writ is still writing it, was stopped without closing it, or lines after the checkpoint were removed")
	}
	if v.keys == nil && s.Checkpoints > 0 {
		if s.Signed > 0 {
			v.note("%d signed checkpoint(s) not checked: no key given (-key)", s.Signed)
		} else {
			v.note("the checkpoints are unsigned: the chain shows lines edited, removed or moved, not a log rewritten whole")
		}
	}
}
