// Package recordenc is the compact binary encoding of task.Record (and
// task.Owner) that the file and Redis stores keep. Unlike the JSON renderings
// of a record it keeps the push configs' secrets, which the stores must hold to
// deliver notifications; it never holds task content (stores keep
// task.Stored records).
//
// Layout (version 1): a version byte, then each field in declaration order:
// strings as uvarint length + bytes, ints as uvarints, times as a presence byte
// and a varint of Unix nanoseconds, lists as a uvarint count + items.
package recordenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/writ-authz/writ/task"
)

const version1 = 1

// ErrCorrupt means the bytes are not a record of a known version.
var ErrCorrupt = errors.New("recordenc: corrupt record")

// AppendRecord appends the encoding of r to b.
func AppendRecord(b []byte, r *task.Record) []byte {
	b = append(b, version1)
	t := &r.Task
	b = appendStrings(b, t.ID, t.ContextID, string(t.State), string(t.Classification))
	b = AppendOwner(b, t.Owner)
	b = appendList(b, t.Artifacts)
	b = appendList(b, t.Chain)
	b = appendStrings(b, r.Agent, r.Protocol, r.Version)
	b = appendTime(b, r.Created)
	b = appendTime(b, r.Updated)
	b = binary.AppendUvarint(b, uint64(max(r.Violations, 0)))
	b = binary.AppendUvarint(b, uint64(len(r.Push)))
	for _, p := range r.Push {
		b = appendStrings(b, p.ID, p.URL, p.Token, p.AuthScheme, p.Credentials)
	}
	return b
}

// Record decodes a record encoded by AppendRecord.
func Record(b []byte) (task.Record, error) {
	d := decoder{b: b}
	var r task.Record
	if v := d.byte(); v != version1 {
		return r, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	t := &r.Task
	t.ID = d.string()
	t.ContextID = d.string()
	t.State = task.State(d.string())
	t.Classification = task.Level(d.string())
	t.Owner = d.owner()
	t.Artifacts = d.list()
	t.Chain = d.list()
	r.Agent = d.string()
	r.Protocol = d.string()
	r.Version = d.string()
	r.Created = d.time()
	r.Updated = d.time()
	r.Violations = int(d.uvarint())
	if n := d.count(5); n > 0 {
		r.Push = make([]task.PushConfig, n)
		for i := range r.Push {
			p := &r.Push[i]
			p.ID, p.URL, p.Token, p.AuthScheme, p.Credentials = d.string(), d.string(), d.string(), d.string(), d.string()
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return task.Record{}, ErrCorrupt
	}
	return r, nil
}

// AppendOwner appends the encoding of o to b.
func AppendOwner(b []byte, o task.Owner) []byte {
	return appendStrings(b, o.AgentID, o.Tenant, o.UserID)
}

// Owner decodes an owner encoded by AppendOwner (and nothing after it).
func Owner(b []byte) (task.Owner, error) {
	d := decoder{b: b}
	o := d.owner()
	if d.err != nil || len(d.b) != 0 {
		return task.Owner{}, ErrCorrupt
	}
	return o, nil
}

func appendStrings(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func appendList(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	return appendStrings(b, ss...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return binary.AppendVarint(append(b, 1), t.UnixNano())
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err, d.b = ErrCorrupt, nil }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list length, refusing one the remaining bytes cannot hold
// (each item takes at least least bytes).
func (d *decoder) count(least int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/least) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) list() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.string()
	}
	return out
}

func (d *decoder) owner() task.Owner {
	return task.Owner{AgentID: d.string(), Tenant: d.string(), UserID: d.string()}
}

func (d *decoder) time() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
		v, n := binary.Varint(d.b)
		if n <= 0 {
			d.fail()
			return time.Time{}
		}
		d.b = d.b[n:]
		return time.Unix(0, v)
	}
	d.fail()
	return time.Time{}
}
