package authz

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/writ-authz/writ/authz/identity"
)

// The decision-cache key of an input under a policy: a digest of the values at
// the paths the policy reads (reads.go), so inputs that differ only where the
// policy cannot look share a decision. A policy that may read everything is
// keyed by Key, on every member. The encoding of each member is generated
// from the input's types (keyInput, keyInputAt and their kin in
// fields_gen.go); this file holds the encoder they write into.

// Key is the decision-cache key of an input under a policy revision: a SHA-256
// over every input member, in a fixed order with length prefixes. The input holds no
// per-request noise (message ids, text), so identical delegations share a key.
func Key(revision string, in *Input) [32]byte {
	e := getKeyEnc()
	e.s(revision)
	keyInput(e, in)
	return e.sum()
}

// key is the decision-cache key of in under p: the revision and, for each read
// path in order, the value there, hashed. The paths themselves need not be
// encoded: they are fixed by the policy, hence by the revision.
func (p *Policy) key(in *Input) [32]byte {
	if p.reads.all {
		return Key(p.Revision, in)
	}
	e := getKeyEnc()
	e.s(p.Revision)
	for _, path := range p.view.keyPaths {
		keyInputAt(e, in, path)
	}
	return e.sum()
}

// residualDomain opens the key of a decision made on a residual: no policy
// revision is this string, so such a key never encodes like a key of the
// whole policy, whose encoding opens with the revision.
const residualDomain = "writ/residual"

// keyOn is the decision-cache key of in when the residual tp decides it (the
// whole policy's key when tp is nil or has no program): the revision, the
// residual's name (its operation, whether the request names a task, its
// target's content) and, for each path the residual reads, the value there.
// Inputs the whole policy would tell apart but the residual cannot (another
// subject on a send that names no task, where only a follow-up reads the
// subject) share a decision.
func (p *Policy) keyOn(tp *targetProgram, prog *program, in *Input) [32]byte {
	if tp == nil || prog == nil || prog.view == nil {
		return p.key(in)
	}
	e := getKeyEnc()
	e.s(residualDomain)
	e.s(p.Revision)
	e.b = append(e.b, tp.ident[:]...)
	if prog.view.reads.all {
		keyInput(e, in)
		return e.sum()
	}
	for _, path := range prog.view.keyPaths {
		keyInputAt(e, in, path)
	}
	return e.sum()
}

// keyEnc is a key being encoded: every value is length-prefixed or of a fixed
// size, so that two different inputs never encode alike.
type keyEnc struct{ b []byte }

// keyEncs pools the encoders (and their buffers) keys are encoded into.
var keyEncs = sync.Pool{New: func() any { return &keyEnc{b: make([]byte, 0, 512)} }}

func getKeyEnc() *keyEnc {
	e := keyEncs.Get().(*keyEnc)
	e.b = e.b[:0]
	return e
}

// sum hashes what e holds and returns e to the pool.
func (e *keyEnc) sum() [32]byte {
	d := sha256.Sum256(e.b)
	keyEncs.Put(e)
	return d
}

// n encodes a length.
func (e *keyEnc) n(n int) {
	e.b = append(e.b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// i encodes an integer member.
func (e *keyEnc) i(v int64) {
	e.b = append(e.b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func (e *keyEnc) s(v string) {
	e.n(len(v))
	e.b = append(e.b, v...)
}

func (e *keyEnc) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *keyEnc) list(vs []string) {
	e.n(len(vs))
	for _, v := range vs {
		e.s(v)
	}
}

// absent marks a read path the input's types do not have (fixed by the
// policy, so it only keeps the encoding aligned).
func (e *keyEnc) absent() { e.b = append(e.b, 0xff) }

// object encodes a whole free-form object by its digest: d when it is not zero
// (identity's digest of a token's claims), else computed.
func (e *keyEnc) object(m map[string]any, d [32]byte) {
	if d == ([32]byte{}) {
		d = identity.DigestClaims(m)
	}
	e.b = append(e.b, d[:]...)
}

// objectAt encodes what the path rest reaches in a free-form object: its JSON
// form, a marker when it is not there.
func (e *keyEnc) objectAt(m map[string]any, rest []string, d [32]byte) {
	if len(rest) == 0 {
		e.object(m, d)
		return
	}
	v, ok := claimAt(m, rest)
	if !ok {
		e.absent()
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		// A claim JSON cannot encode (NaN from Envoy's metadata) is keyed by
		// the whole object's digest, under a tag byte no length prefix of a
		// bounded request starts with.
		d := identity.DigestClaims(m)
		e.b = append(e.b, 0xfe)
		e.b = append(e.b, d[:]...)
		return
	}
	e.s(string(raw))
}

// claimAt follows object keys into the claims; it stops at the first value that
// is not an object (the policy then reads all of that value).
func claimAt(claims map[string]any, path []string) (any, bool) {
	var v any = claims
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return v, true
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}
