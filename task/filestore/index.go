package filestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/internal/recordenc"
)

// Buckets. A stamp is 16 bytes: the update time (Unix ns) and a sequence
// number, both big-endian, so that keys sort by time and then by write order.
var (
	bMeta    = []byte("meta")    // counters and the format version
	bTasks   = []byte("tasks")   // refKey → stamp + encoded record
	bAge     = []byte("age")     // stamp + refKey → nil (every record)
	bFin     = []byte("fin")     // stamp + refKey → nil (finished records)
	bPush    = []byte("push")    // owner key → push configs of the owner (u64)
	bCtx     = []byte("ctx")     // refKey → stamp + encoded owner
	bCtxAge  = []byte("ctxage")  // stamp + refKey → nil
	bTomb    = []byte("tomb")    // refKey → seq + encoded owner
	bTombAge = []byte("tombage") // seq + refKey → nil
	bWork    = []byte("work")    // kind prefix + id → seq + lease + holder + payload
	bLease   = []byte("lease")   // kind prefix + lease + seq + id → nil
	bWorkN   = []byte("workn")   // kind → items (u64)
	bRetired = []byte("retired") // block index (u32) → block of the retired-id set

	taskOwners = fairBuckets{items: []byte("own"), counts: []byte("owncount"), heavy: []byte("ownheavy")}
	ctxOwners  = fairBuckets{items: []byte("ctxown"), counts: []byte("ctxowncount"), heavy: []byte("ctxownheavy")}

	allBuckets = [][]byte{bMeta, bTasks, bAge, bFin, bPush, bCtx, bCtxAge, bTomb, bTombAge, bWork, bLease, bWorkN, bRetired,
		taskOwners.items, taskOwners.counts, taskOwners.heavy, ctxOwners.items, ctxOwners.counts, ctxOwners.heavy}

	kVersion    = []byte("version")
	kTasks      = []byte("tasks")
	kContexts   = []byte("contexts")
	kTombs      = []byte("tombs")
	kEvicted    = []byte("evicted")
	kExpired    = []byte("expired")
	kViolations = []byte("violations")
	kSeq        = []byte("seq")
	kPushSeq    = []byte("pushseq")
	// kRetired is the retired-id set's layout (task.Retired.String) and
	// capacity, fixed when the set is made; kRetiredN counts the ids added.
	kRetired    = []byte("retired")
	kRetiredCap = []byte("retiredcap")
	kRetiredN   = []byte("retiredn")
)

func stateKey(s task.State) []byte { return []byte("state:" + string(s)) }

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getU64(b bucket, k []byte) uint64 {
	if v := b.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// addU64 adds d to the counter k of b (removing it at zero).
func addU64(b bucket, k []byte, d int64) (uint64, error) {
	v := int64(getU64(b, k)) + d
	if v <= 0 {
		return 0, unavailable(b.Delete(k))
	}
	return uint64(v), unavailable(b.Put(k, u64(uint64(v))))
}

// nextSeq returns the next sequence number of the store.
func nextSeq(tx *view) (uint64, error) {
	m := tx.Bucket(bMeta)
	n := getU64(m, kSeq) + 1
	return n, unavailable(m.Put(kSeq, u64(n)))
}

// stamp is an update time and a sequence number.
type stamp [16]byte

func newStamp(tx *view, t time.Time) (stamp, error) {
	var s stamp
	seq, err := nextSeq(tx)
	binary.BigEndian.PutUint64(s[:8], uint64(t.UnixNano()))
	binary.BigEndian.PutUint64(s[8:], seq)
	return s, err
}

func (s stamp) time() time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(s[:8]))) }

// refKey is the key of a ref: the agent's length, the agent, the id.
func refKey(r task.Ref) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 2+len(r.Agent)+len(r.ID)), uint64(len(r.Agent)))
	return append(append(b, r.Agent...), r.ID...)
}

func parseRefKey(k []byte) (task.Ref, error) {
	n, w := binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) < n {
		return task.Ref{}, unavailable(fmt.Errorf("filestore: corrupt key %q", k))
	}
	return task.Ref{Agent: string(k[w : w+int(n)]), ID: string(k[w+int(n):])}, nil
}

// prefixed is a length-prefixed string, so that no prefix is another's.
func prefixed(s string) []byte {
	return append(binary.AppendUvarint(make([]byte, 0, 2+len(s)), uint64(len(s))), s...)
}

func cat(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// fairBuckets is the on-disk form of the memory store's fair index: per
// owner, its items (finished before live, each by update time), a count per
// owner and the owners by count.
type fairBuckets struct {
	// items: prefixed(owner) + class (0 finished, 1 live) + stamp + refKey → nil
	items []byte
	// counts: owner → count (u64) + sequence at which it reached that count (u64)
	counts []byte
	// heavy: count (u64) + ^sequence (u64) + owner → nil; the last key is the
	// owner holding the most, the first to reach that many.
	heavy []byte
}

func itemKey(owner string, done bool, s stamp, rk []byte) []byte {
	class := []byte{1}
	if done {
		class[0] = 0
	}
	return cat(prefixed(owner), class, s[:], rk)
}

func (f fairBuckets) count(tx *view, owner string) uint64 {
	if v := tx.Bucket(f.counts).Get([]byte(owner)); len(v) == 16 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// rank moves owner's count by d, keeping the heavy index.
func (f fairBuckets) rank(tx *view, owner string, d int64) error {
	counts, heavy := tx.Bucket(f.counts), tx.Bucket(f.heavy)
	var n uint64
	if v := counts.Get([]byte(owner)); len(v) == 16 {
		n = binary.BigEndian.Uint64(v)
		if err := heavy.Delete(cat(v[:8], u64(^binary.BigEndian.Uint64(v[8:])), []byte(owner))); err != nil {
			return unavailable(err)
		}
	}
	n = uint64(int64(n) + d)
	if int64(n) <= 0 {
		return unavailable(counts.Delete([]byte(owner)))
	}
	seq, err := nextSeq(tx)
	if err != nil {
		return err
	}
	if err := counts.Put([]byte(owner), cat(u64(n), u64(seq))); err != nil {
		return unavailable(err)
	}
	return unavailable(heavy.Put(cat(u64(n), u64(^seq), []byte(owner)), nil))
}

func (f fairBuckets) add(tx *view, owner string, done bool, s stamp, rk []byte) error {
	if err := tx.Bucket(f.items).Put(itemKey(owner, done, s, rk), nil); err != nil {
		return unavailable(err)
	}
	return f.rank(tx, owner, 1)
}

func (f fairBuckets) remove(tx *view, owner string, done bool, s stamp, rk []byte) error {
	if err := tx.Bucket(f.items).Delete(itemKey(owner, done, s, rk)); err != nil {
		return unavailable(err)
	}
	return f.rank(tx, owner, -1)
}

// move re-files one of owner's items under a new class and stamp.
func (f fairBuckets) move(tx *view, owner string, wasDone bool, old stamp, done bool, s stamp, rk []byte) error {
	b := tx.Bucket(f.items)
	if err := b.Delete(itemKey(owner, wasDone, old, rk)); err != nil {
		return unavailable(err)
	}
	return unavailable(b.Put(itemKey(owner, done, s, rk), nil))
}

// oldest is the refKey of owner's least recently updated item, a finished one
// first.
func (f fairBuckets) oldest(tx *view, owner string) ([]byte, bool) {
	p := prefixed(owner)
	k, _ := tx.Bucket(f.items).Cursor().Seek(p)
	if k == nil || !bytes.HasPrefix(k, p) || len(k) < len(p)+17 {
		return nil, false
	}
	return k[len(p)+17:], true
}

// heaviest is the owner holding the most items.
func (f fairBuckets) heaviest(tx *view) (string, bool) {
	k, _ := tx.Bucket(f.heavy).Cursor().Last()
	if len(k) < 16 {
		return "", false
	}
	return string(k[16:]), true
}

// stored is one record as kept in bTasks.
type stored struct {
	stamp stamp
	rec   task.Record
}

func (s stored) owner() string { return task.OwnerKey(s.rec.Task.Owner) }
func (s stored) done() bool    { return s.rec.Task.State.Terminal() }

func getRecord(tx *view, rk []byte) (stored, bool, error) {
	v := tx.Bucket(bTasks).Get(rk)
	if v == nil {
		return stored{}, false, nil
	}
	if len(v) < 16 {
		return stored{}, false, unavailable(fmt.Errorf("filestore: corrupt record %q", rk))
	}
	rec, err := recordenc.Record(v[16:])
	if err != nil {
		return stored{}, false, unavailable(fmt.Errorf("record %q: %w", rk, err))
	}
	var s stored
	copy(s.stamp[:], v[:16])
	s.rec = rec
	return s, true, nil
}

func putRecord(tx *view, rk []byte, s stored) error {
	v := recordenc.AppendRecord(append(make([]byte, 0, 256), s.stamp[:]...), &s.rec)
	return unavailable(tx.Bucket(bTasks).Put(rk, v))
}

// insert files a new record under every index.
func insert(tx *view, rk []byte, s stored) error {
	if err := putRecord(tx, rk, s); err != nil {
		return err
	}
	if err := tx.Bucket(bAge).Put(cat(s.stamp[:], rk), nil); err != nil {
		return unavailable(err)
	}
	if s.done() {
		if err := tx.Bucket(bFin).Put(cat(s.stamp[:], rk), nil); err != nil {
			return unavailable(err)
		}
	}
	if err := taskOwners.add(tx, s.owner(), s.done(), s.stamp, rk); err != nil {
		return err
	}
	m := tx.Bucket(bMeta)
	if _, err := addU64(m, kTasks, 1); err != nil {
		return err
	}
	if _, err := addU64(m, stateKey(s.rec.Task.State), 1); err != nil {
		return err
	}
	if n := len(s.rec.Push); n > 0 {
		if _, err := addU64(tx.Bucket(bPush), []byte(s.owner()), int64(n)); err != nil {
			return err
		}
	}
	return nil
}

// drop removes a record from every index.
func drop(tx *view, rk []byte, s stored) error {
	if err := tx.Bucket(bTasks).Delete(rk); err != nil {
		return unavailable(err)
	}
	if err := tx.Bucket(bAge).Delete(cat(s.stamp[:], rk)); err != nil {
		return unavailable(err)
	}
	if s.done() {
		if err := tx.Bucket(bFin).Delete(cat(s.stamp[:], rk)); err != nil {
			return unavailable(err)
		}
	}
	if err := taskOwners.remove(tx, s.owner(), s.done(), s.stamp, rk); err != nil {
		return err
	}
	m := tx.Bucket(bMeta)
	if _, err := addU64(m, kTasks, -1); err != nil {
		return err
	}
	if _, err := addU64(m, stateKey(s.rec.Task.State), -1); err != nil {
		return err
	}
	if n := len(s.rec.Push); n > 0 {
		if _, err := addU64(tx.Bucket(bPush), []byte(s.owner()), -int64(n)); err != nil {
			return err
		}
	}
	return nil
}

// update rewrites a record after a change, moving it to the new time in every
// index. old is the record as it was stored.
func update(tx *view, rk []byte, old stored, next task.Record, now time.Time) (stored, error) {
	st, err := newStamp(tx, now)
	if err != nil {
		return stored{}, err
	}
	next.Updated = now
	s := stored{stamp: st, rec: next}
	if err := putRecord(tx, rk, s); err != nil {
		return stored{}, err
	}
	age := tx.Bucket(bAge)
	if err := age.Delete(cat(old.stamp[:], rk)); err != nil {
		return stored{}, unavailable(err)
	}
	if err := age.Put(cat(st[:], rk), nil); err != nil {
		return stored{}, unavailable(err)
	}
	fin := tx.Bucket(bFin)
	if old.done() {
		if err := fin.Delete(cat(old.stamp[:], rk)); err != nil {
			return stored{}, unavailable(err)
		}
	}
	if s.done() {
		if err := fin.Put(cat(st[:], rk), nil); err != nil {
			return stored{}, unavailable(err)
		}
	}
	if err := taskOwners.move(tx, old.owner(), old.done(), old.stamp, s.done(), st, rk); err != nil {
		return stored{}, err
	}
	if from, to := old.rec.Task.State, next.Task.State; from != to {
		m := tx.Bucket(bMeta)
		if _, err := addU64(m, stateKey(from), -1); err != nil {
			return stored{}, err
		}
		if _, err := addU64(m, stateKey(to), 1); err != nil {
			return stored{}, err
		}
	}
	if d := len(next.Push) - len(old.rec.Push); d != 0 {
		if _, err := addU64(tx.Bucket(bPush), []byte(s.owner()), int64(d)); err != nil {
			return stored{}, err
		}
	}
	return s, nil
}

// expiredAt reports whether something last updated at t has outlived ttl.
func expiredAt(t time.Time, ttl time.Duration, now time.Time) bool {
	return !now.Before(t.Add(ttl))
}

// sweep removes up to limit expired records and contexts, oldest first, and
// returns how many it removed.
func sweep(tx *view, ttl time.Duration, now time.Time, limit int) (int, error) {
	n := 0
	c := tx.Bucket(bAge).Cursor()
	k, _ := c.from(tx.swept.age)
	var last []byte
	for ; k != nil && n < limit; k, _ = c.Next() {
		last = k
		var st stamp
		copy(st[:], k[:16])
		if !expiredAt(st.time(), ttl, now) {
			break
		}
		rk := append([]byte(nil), k[16:]...)
		s, ok, err := getRecord(tx, rk)
		if err != nil {
			return n, err
		}
		if !ok { // an index entry without its record: repair
			if err := tx.Bucket(bAge).Delete(k); err != nil {
				return n, unavailable(err)
			}
			continue
		}
		if err := expire(tx, rk, s); err != nil {
			return n, err
		}
		n++
	}
	tx.swept.age = orLast(k, last)
	cc := tx.Bucket(bCtxAge).Cursor()
	k, _ = cc.from(tx.swept.ctx)
	last = nil
	for ; k != nil && n < limit; k, _ = cc.Next() {
		last = k
		var st stamp
		copy(st[:], k[:16])
		if !expiredAt(st.time(), ttl, now) {
			break
		}
		rk := append([]byte(nil), k[16:]...)
		if err := dropContext(tx, rk); err != nil {
			return n, err
		}
		n++
	}
	tx.swept.ctx = orLast(k, last)
	return n, nil
}

// orLast is where a sweep stopped: the key it did not remove, or the last
// one it did when it reached the end.
func orLast(k, last []byte) []byte {
	if k != nil {
		return k
	}
	return last
}

// expire drops an expired record and counts it.
func expire(tx *view, rk []byte, s stored) error {
	if err := drop(tx, rk, s); err != nil {
		return err
	}
	_, err := addU64(tx.Bucket(bMeta), kExpired, 1)
	return err
}

// evict drops a live record to honour a bound, leaves its tombstone and
// reports it.
func evict(tx *view, w *writeCtx, rk []byte, s stored, reason string, maxTombs int) error {
	if err := drop(tx, rk, s); err != nil {
		return err
	}
	if _, err := addU64(tx.Bucket(bMeta), kEvicted, 1); err != nil {
		return err
	}
	if err := tombstone(tx, rk, s.rec.Task.Owner, maxTombs); err != nil {
		return err
	}
	w.ev = append(w.ev, task.Eviction{Ref: s.rec.Ref(), Owner: s.rec.Task.Owner, State: s.rec.Task.State, Reason: reason})
	return nil
}

// tombstone remembers the owner of an evicted task, dropping the oldest
// tombstones beyond maxTombs.
func tombstone(tx *view, rk []byte, owner task.Owner, maxTombs int) error {
	tomb, age, m := tx.Bucket(bTomb), tx.Bucket(bTombAge), tx.Bucket(bMeta)
	if old := tomb.Get(rk); len(old) >= 8 {
		if err := age.Delete(cat(old[:8], rk)); err != nil {
			return unavailable(err)
		}
	} else if _, err := addU64(m, kTombs, 1); err != nil {
		return err
	}
	seq, err := nextSeq(tx)
	if err != nil {
		return err
	}
	if err := tomb.Put(rk, recordenc.AppendOwner(u64(seq), owner)); err != nil {
		return unavailable(err)
	}
	if err := age.Put(cat(u64(seq), rk), nil); err != nil {
		return unavailable(err)
	}
	for getU64(m, kTombs) > uint64(maxTombs) {
		k, _ := age.Cursor().First()
		if k == nil {
			break
		}
		if err := dropTombstone(tx, append([]byte(nil), k[8:]...)); err != nil {
			return err
		}
	}
	return nil
}

func dropTombstone(tx *view, rk []byte) error {
	tomb := tx.Bucket(bTomb)
	old := tomb.Get(rk)
	if len(old) < 8 {
		return nil
	}
	if err := tx.Bucket(bTombAge).Delete(cat(old[:8], rk)); err != nil {
		return unavailable(err)
	}
	if err := tomb.Delete(rk); err != nil {
		return unavailable(err)
	}
	_, err := addU64(tx.Bucket(bMeta), kTombs, -1)
	return err
}

// context entries

func getContext(tx *view, rk []byte) (stamp, task.Owner, bool, error) {
	v := tx.Bucket(bCtx).Get(rk)
	if v == nil {
		return stamp{}, task.Owner{}, false, nil
	}
	var st stamp
	if len(v) < 16 {
		return st, task.Owner{}, false, unavailable(fmt.Errorf("filestore: corrupt context %q", rk))
	}
	copy(st[:], v[:16])
	o, err := recordenc.Owner(v[16:])
	if err != nil {
		return st, o, false, unavailable(err)
	}
	return st, o, true, nil
}

func putContext(tx *view, rk []byte, st stamp, o task.Owner) error {
	if err := tx.Bucket(bCtx).Put(rk, recordenc.AppendOwner(append([]byte(nil), st[:]...), o)); err != nil {
		return unavailable(err)
	}
	return unavailable(tx.Bucket(bCtxAge).Put(cat(st[:], rk), nil))
}

func dropContext(tx *view, rk []byte) error {
	st, o, ok, err := getContext(tx, rk)
	if err != nil || !ok {
		if err == nil { // index entry without its context: repair
			c := tx.Bucket(bCtxAge).Cursor()
			if k, _ := c.First(); k != nil && bytes.Equal(k[16:], rk) {
				return unavailable(c.Delete())
			}
		}
		return err
	}
	if err := tx.Bucket(bCtx).Delete(rk); err != nil {
		return unavailable(err)
	}
	if err := tx.Bucket(bCtxAge).Delete(cat(st[:], rk)); err != nil {
		return unavailable(err)
	}
	if err := ctxOwners.remove(tx, task.OwnerKey(o), false, st, rk); err != nil {
		return err
	}
	_, err = addU64(tx.Bucket(bMeta), kContexts, -1)
	return err
}

// retire adds the id of kind on ref to the retired-id set laid out as r.
func retire(tx *view, r task.Retired, kind byte, ref task.Ref) error {
	at := r.Locate(kind, ref)
	b := tx.Bucket(bRetired)
	k := binary.BigEndian.AppendUint32(nil, at.Block)
	block := make([]byte, task.RetiredBlockBytes)
	if v := b.Get(k); len(v) == task.RetiredBlockBytes {
		copy(block, v)
	}
	if !at.Set(block) {
		return nil
	}
	if err := b.Put(k, block); err != nil {
		return unavailable(err)
	}
	_, err := addU64(tx.Bucket(bMeta), kRetiredN, 1)
	return err
}

// isRetired reports whether the retired-id set holds the id.
func isRetired(tx *view, r task.Retired, kind byte, ref task.Ref) bool {
	at := r.Locate(kind, ref)
	return at.In(tx.Bucket(bRetired).Get(binary.BigEndian.AppendUint32(nil, at.Block)))
}

// initRetired reads the retired-id set's layout, or makes the set with the
// layout of l: then every task, tombstone and context already in the file (a
// file from before the set) enters it, so none of them can become unknown.
func initRetired(tx *view, l task.MemoryLimits) (task.Retired, int, error) {
	m := tx.Bucket(bMeta)
	if v := m.Get(kRetired); v != nil {
		r, err := task.ParseRetired(string(v))
		if err != nil {
			return task.Retired{}, 0, fmt.Errorf("filestore: %w", err)
		}
		return r, int(getU64(m, kRetiredCap)), nil
	}
	r, err := l.Retired()
	if err != nil {
		return task.Retired{}, 0, err
	}
	for _, b := range []struct {
		name []byte
		kind byte
	}{{bTasks, task.RetiredTask}, {bTomb, task.RetiredTask}, {bCtx, task.RetiredContext}} {
		var refs []task.Ref
		err := tx.Bucket(b.name).ForEach(func(k, _ []byte) error {
			ref, err := parseRefKey(k)
			refs = append(refs, ref)
			return err
		})
		if err != nil {
			return task.Retired{}, 0, err
		}
		for _, ref := range refs {
			if err := retire(tx, r, b.kind, ref); err != nil {
				return task.Retired{}, 0, err
			}
		}
	}
	if err := m.Put(kRetired, []byte(r.String())); err != nil {
		return task.Retired{}, 0, unavailable(err)
	}
	if err := m.Put(kRetiredCap, u64(uint64(l.RetiredCapacity))); err != nil {
		return task.Retired{}, 0, unavailable(err)
	}
	return r, l.RetiredCapacity, nil
}
