package contract

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// Prefixes of record kinds. The common schema names evt, mem, prj, conv, art,
// pol, apr, rcpt, src, psg, cit, nb, sug, rel; Caduceus adds its own below.
const (
	PrefixEvent        = "evt"
	PrefixMemory       = "mem"
	PrefixProject      = "prj"
	PrefixConversation = "conv"
	PrefixArtifact     = "art"
	PrefixPolicy       = "pol"
	PrefixApproval     = "apr"
	PrefixReceipt      = "rcpt"
	PrefixSource       = "src"
	PrefixPassage      = "psg"
	PrefixCitation     = "cit"
	PrefixNotebook     = "nb"
	PrefixSuggestion   = "sug"
	PrefixRelation     = "rel"
	PrefixTick         = "tick" // an executor tick
	PrefixDecision     = "dec"  // a trader decision attempt
)

// crockford is the ULID alphabet (Crockford's base32, no I, L, O, U).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var ulidState struct {
	sync.Mutex
	ms   uint64
	rand [10]byte
}

// NewID returns a prefix-typed id whose body is a ULID: 48 bits of
// millisecond time then 80 random bits, 26 characters of Crockford base32.
// Ids made by one process sort by creation time, also within one millisecond
// (the random part is incremented, as the ULID spec's monotonic mode does).
// prefix must be 2 to 6 lowercase letters.
func NewID(prefix string) string {
	return prefix + "_" + NewULID(time.Now())
}

// NewULID returns the 26-character ULID for t.
func NewULID(t time.Time) string {
	ms := uint64(t.UnixMilli())
	var entropy [10]byte
	ulidState.Lock()
	switch {
	case ms == ulidState.ms:
		// Increment the 80-bit random part: ids stay ordered within a millisecond.
		for i := 9; i >= 0; i-- {
			ulidState.rand[i]++
			if ulidState.rand[i] != 0 {
				break
			}
		}
		entropy = ulidState.rand
	case ms > ulidState.ms:
		ulidState.ms = ms
		mustRand(ulidState.rand[:])
		ulidState.rand[0] &= 0x7f // leave room to increment without overflow
		entropy = ulidState.rand
	default: // a time before the last one: fresh randomness, state untouched
		mustRand(entropy[:])
	}
	ulidState.Unlock()

	var b [16]byte
	binary.BigEndian.PutUint16(b[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(b[2:6], uint32(ms))
	copy(b[6:], entropy[:])
	return encodeULID(b)
}

func encodeULID(b [16]byte) string {
	// 128 bits -> 26 base32 characters, the first carrying 3 bits.
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

func mustRand(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic("contract: crypto/rand failed: " + err.Error())
	}
}
