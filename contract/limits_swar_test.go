package contract

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSpecial8 checks the 8-byte test the checker's string scan skips
// plain runs with against its byte-by-byte definition: every byte value
// in every lane, then random words.
func TestSpecial8(t *testing.T) {
	check := func(b [8]byte) {
		want := false
		for _, c := range b {
			want = want || c < 0x20 || c == '"' || c == '\\'
		}
		if got := special8(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("special8(% x) = %v, want %v", b, got, want)
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

// TestCheckJSONStringStops checks that the string scan stops at the byte
// that ends or breaks a string wherever it falls in an 8-byte run: the
// refusal names its offset.
func TestCheckJSONStringStops(t *testing.T) {
	for n := range 40 {
		plain := strings.Repeat("ab-", n)[:n]
		for _, c := range []byte{0x01, 0x1f, 0} {
			doc := `{"k":"` + plain + string(c) + `"}`
			at := len(`{"k":"`) + len(plain)
			err := CheckJSON([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), fmt.Sprint("offset ", at)) {
				t.Fatalf("%q: %v, want a refusal at offset %d", doc, err, at)
			}
		}
		if err := CheckJSON([]byte(`{"k":"` + plain + `\"\\é"}`)); err != nil {
			t.Fatalf("%q: %v", plain, err)
		}
	}
}
