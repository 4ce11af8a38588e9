package decisionlog

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// The chain of custody: every line of the log carries its seq (its number
// in the log, the log_started line being 1) and prev, the hex SHA-256 of the
// exact bytes of the line before it, newline included. The first line of a
// fresh log takes as prev the digest of a genesis string naming the log's
// id; a run appending to an existing file takes the digest of the file's
// last line, and the first line of a file started by rotation the digest of
// the rotated file's last line. Every Checkpoint lines, at rotation and at
// close, writ writes a checkpoint line whose prev (and so every line before
// it) and seq are signed with the configured key. Verify checks all of it.

// Checkpoint reasons, as a checkpoint line's "reason".
const (
	CheckpointInterval = "interval"
	CheckpointRotation = "rotation"
	CheckpointClose    = "close"
)

// genesisPrefix names the digest a fresh log's first line chains to.
const genesisPrefix = "writ decision log v1 genesis "

// Genesis is the digest the first line of a fresh log with the given id
// takes as prev: SHA-256 of "writ decision log v1 genesis " + id.
func Genesis(logID string) [sha256.Size]byte {
	return sha256.Sum256([]byte(genesisPrefix + logID))
}

// newLogID is a random 128-bit id, base64url: a log (one run of the writer)
// is named by it in its genesis, its headers and its checkpoints.
func newLogID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics rather)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// seal is the place of the next line in the chain.
type seal struct {
	seq  uint64
	prev [sha256.Size]byte
}

// chainState is the writer's position in the chain. It is a value, so that a
// failed write can put the chain back where the file is.
type chainState struct {
	started bool              // this run's log_started line is written
	seq     uint64            // seq of the last line sealed
	head    [sha256.Size]byte // digest of the last line sealed (or the genesis)
	since   int               // lines sealed since the last checkpoint
	// dropped and failed are the totals of lines lost (Stats.Dropped,
	// Stats.Errors) that the log has told of in a lines_lost line.
	dropped, failed uint64
	// torn: the file this run appends to ends in a line cut short; the run's
	// first write ends that line first.
	torn bool
}

func (c *chainState) next() seal { return seal{seq: c.seq + 1, prev: c.head} }

// advance records line (sealed by next) as the chain's head.
func (c *chainState) advance(line []byte) {
	c.seq++
	c.head = sha256.Sum256(line)
	c.since++
}

// appendLogStarted writes the first line of a run: a fresh log (prev the
// genesis) or a run appending to an existing file (prev its last line).
func appendLogStarted(b []byte, t time.Time, logID string, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", t)
	e.str("type", TypeLogStarted)
	e.str("log_id", logID)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// appendLogContinued writes the first line of a file started by rotation:
// continues names the file the previous lines were rotated to.
func appendLogContinued(b []byte, t time.Time, logID, continues string, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", t)
	e.str("type", TypeLogContinued)
	e.str("log_id", logID)
	e.str("continues", continues)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// appendLinesLost writes the log's own record of lines it lost since it
// last told: dropped (the buffer was full) and failed (a write failed).
func appendLinesLost(b []byte, t time.Time, dropped, failed uint64, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", t)
	e.str("type", TypeLinesLost)
	e.integer("dropped", int64(min(dropped, 1<<62)))
	e.integer("failed", int64(min(failed, 1<<62)))
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// appendCheckpointPayload writes what a checkpoint signs: the log, the
// checkpoint's own seq and prev (so the seq-1 lines before it), why and when.
// Verify compares it with the checkpoint line's fields.
func appendCheckpointPayload(b []byte, t time.Time, logID, reason string, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.str("log_id", logID)
	e.str("reason", reason)
	e.time("time", t)
	e.seal(s)
	e.end()
	return e.b
}

// appendCheckpoint writes a checkpoint line; jws is "" when the log has no
// signing key.
func appendCheckpoint(b []byte, t time.Time, logID, reason, jws string, s *seal) []byte {
	e := enc{b: b}
	e.begin()
	e.time("time", t)
	e.str("type", TypeCheckpoint)
	e.str("log_id", logID)
	e.str("reason", reason)
	e.str("jws", jws)
	e.seal(s)
	e.end()
	return append(e.b, '\n')
}

// maxLastLine bounds the last line read back from an existing file (as
// writ report bounds a line).
const maxLastLine = 16 << 20

// readLastLine is lastLine of the first size bytes of the file at path.
func readLastLine(path string, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return lastLine(f, size)
}

// lastLine returns the last line of the size bytes of r, its newline
// included (a last line without one, torn by a crash, is returned as it is).
// It reads backwards in chunks, so a large file costs one line's reading.
func lastLine(r io.ReaderAt, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	const chunk = 64 << 10
	var tail []byte
	end := size
	for end > 0 {
		start := max(end-chunk, 0)
		buf := make([]byte, end-start)
		if _, err := r.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		tail = append(buf, tail...)
		// The newline that ends the line before the last one; the last
		// byte is the last line's own.
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 {
			return tail[i+1:], nil
		}
		if len(tail) > maxLastLine {
			return nil, fmt.Errorf("its last line is longer than %d bytes", maxLastLine)
		}
		end = start
	}
	return tail, nil
}
