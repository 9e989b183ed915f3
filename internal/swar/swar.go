// Package swar holds byte tests over eight bytes at once, in one uint64
// (SIMD within a register), for the scans of JSON strings and request
// text. Each test is exact as to whether any of the eight bytes qualifies,
// not as to which.
package swar

import "encoding/binary"

const (
	// Ones is a byte of 1 in each of the eight lanes.
	Ones = 0x0101010101010101
	// Highs is the high bit of each of the eight lanes.
	Highs = 0x8080808080808080
)

// Load reads eight bytes of b as a little-endian word: b[0] is lane 0.
func Load(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// HasZero reports whether any byte of x is zero.
func HasZero(x uint64) bool { return (x-Ones)&^x&Highs != 0 }

// Special reports whether any byte of x is '"', '\\' or a control byte
// (< 0x20): the bytes a JSON string scan must stop at.
func Special(x uint64) bool {
	return (x-0x20*Ones)&^x&Highs != 0 || HasZero(x^('"'*Ones)) || HasZero(x^('\\'*Ones))
}
