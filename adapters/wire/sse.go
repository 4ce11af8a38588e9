package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/writ-authz/writ/task"
)

// SSEEvent is one server-sent event block. Raw holds the block's bytes exactly as
// read (including comments and the blank line that ends it) so a proxy can pass it
// on unchanged; Data joins the block's data lines with "\n".
type SSEEvent struct {
	ID      string
	Event   string
	Data    []byte
	HasData bool
	// Comment is set when the block held only comment lines (a keep-alive).
	Comment bool
	Raw     []byte
}

// ErrSSELineTooLong is returned when one event exceeds the reader's limit.
var ErrSSELineTooLong = errors.New("server-sent event exceeds the size limit")

// DefaultMaxEventBytes bounds one SSE event.
const DefaultMaxEventBytes = 4 << 20

// SSEReader reads server-sent events one block at a time. It is not safe for
// concurrent use.
type SSEReader struct {
	r   *bufio.Reader
	max int
}

// NewSSEReader returns a reader of r whose events may be at most maxEventBytes
// long (0 means DefaultMaxEventBytes).
func NewSSEReader(r io.Reader, maxEventBytes int) *SSEReader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	return &SSEReader{r: bufio.NewReaderSize(r, 16<<10), max: maxEventBytes}
}

// Next returns the next event block. At the end of the stream it returns io.EOF;
// a final block not ended by a blank line is still returned first.
func (s *SSEReader) Next() (SSEEvent, error) {
	var ev SSEEvent
	var raw, data bytes.Buffer
	sawField := false
	for {
		line, err := s.readLine()
		if len(line) > 0 || err == nil {
			raw.Write(line)
		}
		if raw.Len() > s.max {
			return SSEEvent{}, fmt.Errorf("%w (%d bytes)", ErrSSELineTooLong, s.max)
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(trimmed) > 0 {
					s.field(&ev, &data, trimmed, &sawField)
				}
				if raw.Len() > 0 && (sawField || ev.Comment) {
					return s.finish(ev, raw, data), nil
				}
				return SSEEvent{}, io.EOF
			}
			return SSEEvent{}, err
		}
		if len(trimmed) == 0 {
			if !sawField && !ev.Comment {
				continue // stray blank line between events
			}
			return s.finish(ev, raw, data), nil
		}
		s.field(&ev, &data, trimmed, &sawField)
	}
}

func (s *SSEReader) finish(ev SSEEvent, raw, data bytes.Buffer) SSEEvent {
	ev.Raw = raw.Bytes()
	if ev.HasData {
		ev.Data = data.Bytes()
		ev.Comment = false
	}
	return ev
}

func (s *SSEReader) field(ev *SSEEvent, data *bytes.Buffer, line []byte, sawField *bool) {
	if line[0] == ':' {
		if !*sawField {
			ev.Comment = true
		}
		return
	}
	*sawField = true
	ev.Comment = false // a block with any field is not a keep-alive
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "data":
		if ev.HasData {
			data.WriteByte('\n')
		}
		data.Write(value)
		ev.HasData = true
	case "id":
		ev.ID = string(value)
	case "event":
		ev.Event = string(value)
	}
}

// readLine reads one line including its terminator, refusing lines over the limit.
func (s *SSEReader) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > s.max {
			return nil, fmt.Errorf("%w (%d bytes)", ErrSSELineTooLong, s.max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

// EventReader yields an upstream stream's SSE blocks (Raw: the exact bytes to
// pass on) with the lifecycle events each carries. A block that is not a valid
// event is returned with a non-nil error and its Raw set; the stream may go on.
// An error with an empty Raw is a read error that ends the stream (io.EOF at
// its end). Each adapter's stream reader implements it.
type EventReader interface {
	Next() (SSEEvent, []task.Event, error)
}
