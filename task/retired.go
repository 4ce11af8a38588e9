package task

import (
	"crypto/sha1" //nolint:gosec // a Bloom filter's hash, not a security hash: SHA-1 is what Redis scripts have (redis.sha1hex)
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
)

// The retired-id set: every task id and context (or session) id a store has
// recorded, kept for ever in a few bits each, so that an id writ has seen never
// becomes unknown again. Records and tombstones are bounded and roll over (a
// flood of new tasks evicts old ones, TTL expires them); the set does not:
// under lifecycle.unknown_tasks: allow a follow-up on a task the store no
// longer holds is answered not found instead of letting its caller claim the
// id, and a context the store no longer holds is never claimed again.
//
// It is a blocked Bloom filter: an id sets Retired.K bits inside one block of
// 512 bits, chosen from the SHA-1 of the id. A Bloom filter never forgets and
// never says "new" of an id it holds; it may say "seen" of an id it never
// held, at its false-positive rate, which only refuses a fresh id. One block
// per id keeps a store's write small: the file store rewrites one 64-byte
// value, the Redis script one hash field.
//
// Hand-written rather than a library (github.com/bits-and-blooms/bloom): the
// Redis store's Lua scripts must compute the same bit positions as Go, and
// Lua has SHA-1 (redis.sha1hex) and doubles, not murmur3 over 64-bit words;
// the stores also keep the filter sparse, block by block, which the library's
// one bit array does not allow.

// RetiredBlockBytes is the size of one block of the filter (512 bits).
const RetiredBlockBytes = 64

const (
	retiredBlockBits = RetiredBlockBytes * 8
	// maxRetiredK bounds the bits one id sets.
	maxRetiredK = 32
	// MaxRetiredBlocks bounds the filter (2^24 blocks of 64 bytes: 1 GiB): the
	// block index is taken from 32 bits of the hash, which Lua's doubles hold
	// exactly, and must stay far below 2^32 to be uniform.
	MaxRetiredBlocks = 1 << 24
)

// Kinds of retired ids: a task's id and a context's are different ids even when
// the strings are equal.
const (
	RetiredTask    byte = 't'
	RetiredContext byte = 'c'
)

// ErrRetired is the answer when the id was recorded once and the store no longer holds it (it
// expired or was evicted), so it cannot be claimed again. At the retired-id
// set's false-positive rate it is also the answer for an id never recorded.
var ErrRetired = errors.New("id retired")

// Retired is the layout of a retired-id set: how many blocks, and how many bits
// of its block an id sets. Every store of one deployment must use the same
// layout; the file and Redis stores keep the layout they were created with.
type Retired struct {
	Blocks uint32
	K      int
}

// NewRetired sizes a set for capacity ids at false-positive rate fp (the rate
// once capacity ids are held; it rises above it beyond). It returns an error
// for a capacity below 1, an fp outside (0, 0.5), or a set over
// MaxRetiredBlocks.
func NewRetired(capacity int, fp float64) (Retired, error) {
	if capacity < 1 {
		return Retired{}, fmt.Errorf("retired ids: capacity %d must be at least 1", capacity)
	}
	if !(fp > 0 && fp < 0.5) {
		return Retired{}, fmt.Errorf("retired ids: false-positive rate %g must be between 0 and 0.5", fp)
	}
	d, ok := density(fp)
	if !ok {
		return Retired{}, fmt.Errorf("retired ids: no layout reaches a false-positive rate of %g (at least %g)", fp, MinRetiredFalsePositive)
	}
	blocks := math.Ceil(float64(capacity) * d.bits / retiredBlockBits)
	if blocks > MaxRetiredBlocks {
		return Retired{}, fmt.Errorf("retired ids: %d ids at a false-positive rate of %g need %.0f blocks of %d bytes, over the bound of %d",
			capacity, fp, blocks, RetiredBlockBytes, MaxRetiredBlocks)
	}
	return Retired{Blocks: uint32(max(blocks, 1)), K: d.k}, nil
}

// MinRetiredFalsePositive is the lowest false-positive rate a set is sized
// for (blocks of 512 bits fill too unevenly to go much lower).
const MinRetiredFalsePositive = 1e-8

// retiredDensity is how many bits an id takes, and how many it sets, for a
// false-positive rate.
type retiredDensity struct {
	bits float64
	k    int
}

// densities remembers density's answers: they depend on the rate only, and
// every store of a process asks for the same.
var densities sync.Map // float64 → retiredDensity

// density finds the fewest bits an id (in steps of a quarter bit) and the k
// that reach fp: from a standard Bloom filter's -ln(fp)/ln(2)^2 upwards, a
// blocked filter needing more since its blocks fill unevenly.
func density(fp float64) (retiredDensity, bool) {
	if v, ok := densities.Load(fp); ok {
		return v.(retiredDensity), true
	}
	if fp < MinRetiredFalsePositive {
		return retiredDensity{}, false
	}
	for bits := -math.Log(fp) / (math.Ln2 * math.Ln2); bits < 4*retiredBlockBits; bits += 0.25 {
		for k := 1; k <= maxRetiredK; k++ {
			if blockedFP(bits, k) <= fp {
				d := retiredDensity{bits: bits, k: k}
				densities.Store(fp, d)
				return d, true
			}
		}
	}
	return retiredDensity{}, false
}

// blockedFP is the false-positive rate of a blocked Bloom filter holding one
// id per bits bits, each setting k bits of a 512-bit block: the ids in a block
// are Poisson distributed, and a block holding j ids answers a fresh id wrongly
// with the probability that its k bits are all set.
func blockedFP(bits float64, k int) float64 {
	lambda := retiredBlockBits / bits
	miss := 1 - 1.0/retiredBlockBits
	fp, p := 0.0, math.Exp(-lambda) // p is Poisson(j; lambda)
	for j := 0; j < int(lambda*4)+64; j++ {
		if j > 0 {
			p *= lambda / float64(j)
		}
		fp += p * math.Pow(1-math.Pow(miss, float64(k*j)), float64(k))
	}
	return fp
}

// RetiredBits is where one id lives in a set: its block and the K bit
// positions inside it.
type RetiredBits struct {
	Block uint32
	Bits  [maxRetiredK]uint16
	K     int
}

// Locate returns where the id of kind (RetiredTask, RetiredContext) on ref's
// agent lives. The key is the kind byte and the ref as the stores key it (the
// agent's length as a uvarint, the agent, the id); its hash stream is
// SHA-1(key) || SHA-1(key || 0x01) || SHA-1(key || 0x02), read as hex digits:
// the block is the first 8 digits modulo Blocks, and bit i of K the next
// 3-digit group i modulo 512 (4096 is a multiple of 512, so each bit is
// uniform and independent of the others). The Redis store's scripts compute
// the same (scripts.go).
func (r Retired) Locate(kind byte, ref Ref) RetiredBits {
	key := make([]byte, 0, 2+binary.MaxVarintLen64+len(ref.Agent)+len(ref.ID))
	key = append(key, kind)
	key = binary.AppendUvarint(key, uint64(len(ref.Agent)))
	key = append(append(key, ref.Agent...), ref.ID...)
	var stream [3 * sha1.Size]byte
	for i := range 3 {
		k := key
		if i > 0 {
			k = append(key, byte(i))
		}
		sum := sha1.Sum(k) //nolint:gosec // see the import
		copy(stream[i*sha1.Size:], sum[:])
	}
	// nibble is hex digit n of the stream.
	nibble := func(n int) uint32 { return uint32(stream[n/2]>>(4*(1-n%2))) & 0xf }
	out := RetiredBits{Block: binary.BigEndian.Uint32(stream[0:4]) % r.Blocks, K: r.K}
	for i := range r.K {
		n := 8 + 3*i
		out.Bits[i] = uint16((nibble(n)<<8 | nibble(n+1)<<4 | nibble(n+2)) % retiredBlockBits)
	}
	return out
}

// In reports whether every bit of at is set in block (a block never written is
// all zeros).
func (at *RetiredBits) In(block []byte) bool {
	if len(block) != RetiredBlockBytes {
		return false
	}
	for _, bit := range at.Bits[:at.K] {
		if block[bit/8]&(0x80>>(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// Set sets at's bits in block (RetiredBlockBytes long) and reports whether any
// was clear: false means the set already answered "seen" for the id.
func (at *RetiredBits) Set(block []byte) bool {
	changed := false
	for _, bit := range at.Bits[:at.K] {
		m := byte(0x80 >> (bit % 8))
		if block[bit/8]&m == 0 {
			block[bit/8] |= m
			changed = true
		}
	}
	return changed
}

// String is the layout as the stores record it ("blocks/k").
func (r Retired) String() string { return fmt.Sprintf("%d/%d", r.Blocks, r.K) }

// ParseRetired reads a layout String wrote.
func ParseRetired(s string) (Retired, error) {
	var r Retired
	if _, err := fmt.Sscanf(s, "%d/%d", &r.Blocks, &r.K); err != nil || r.Blocks < 1 || r.Blocks > MaxRetiredBlocks ||
		r.K < 1 || r.K > maxRetiredK {
		return Retired{}, fmt.Errorf("retired ids: bad layout %q", s)
	}
	return r, nil
}
