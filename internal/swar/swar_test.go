package swar

import (
	"math/rand/v2"
	"testing"
)

// TestSpecialAndHasZero check both tests against their byte-by-byte
// definitions: every byte value in every lane, then random words rich in
// the bytes at their edges.
func TestSpecialAndHasZero(t *testing.T) {
	check := func(b [8]byte) {
		special, zero := false, false
		for _, c := range b {
			special = special || c < 0x20 || c == '"' || c == '\\'
			zero = zero || c == 0
		}
		x := Load(b[:])
		if got := Special(x); got != special {
			t.Fatalf("Special(% x) = %v, want %v", b, got, special)
		}
		if got := HasZero(x); got != zero {
			t.Fatalf("HasZero(% x) = %v, want %v", b, got, zero)
		}
	}
	for c := range 256 {
		for lane := range 8 {
			b := [8]byte{'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'}
			b[lane] = byte(c)
			check(b)
		}
	}
	rng := rand.New(rand.NewPCG(8, 8))
	interesting := []byte{0, 0x1f, 0x20, 0x21, '"', '\\', 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a', 0x5b, 0x5d, 0x02, 0x23}
	for range 200000 {
		var b [8]byte
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = interesting[rng.IntN(len(interesting))]
			} else {
				b[i] = byte(rng.IntN(256))
			}
		}
		check(b)
	}
}
