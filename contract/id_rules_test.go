package contract_test

import (
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// ulidRuns counts the runs of the ULID test in this process.
var ulidRuns atomic.Int64

// ulidRandom is the 80-bit random part of a ULID: its last 16 characters.
func ulidRandom(t *testing.T, u string) *big.Int {
	t.Helper()
	const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	n := new(big.Int)
	for _, c := range u[len(u)-16:] {
		d := strings.IndexRune(crockford, c)
		if d < 0 {
			t.Fatalf("%q is not Crockford base32", u)
		}
		n.Lsh(n, 5).Or(n, big.NewInt(int64(d)))
	}
	return n
}

// TestULIDMonotonicWithinAMillisecondFreshAcross states the ULID rule of
// NewULID (the spec's monotonic mode): within one millisecond the random
// part is the last one plus one, so ids sort by creation; a later
// millisecond draws a fresh random part (not the last plus one: the odds
// it is are 2^-80); a time before the last draws fresh randomness and
// leaves the sequence of the last millisecond as it was. The times are in
// 2100, after any id other tests make now, and later on each run of the
// test in one process (the ULID state is the process's).
func TestULIDMonotonicWithinAMillisecondFreshAcross(t *testing.T) {
	at := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(ulidRuns.Add(1)) * time.Hour)
	one := big.NewInt(1)
	a := contract.NewULID(at)
	b := contract.NewULID(at)
	if a[:10] != b[:10] || new(big.Int).Add(ulidRandom(t, a), one).Cmp(ulidRandom(t, b)) != 0 {
		t.Fatalf("two ULIDs in one millisecond: %s then %s, want the random part plus one", a, b)
	}
	c := contract.NewULID(at.Add(time.Millisecond))
	if c <= b || c[:10] == b[:10] {
		t.Fatalf("a ULID a millisecond later (%s) does not sort after %s", c, b)
	}
	if new(big.Int).Add(ulidRandom(t, b), one).Cmp(ulidRandom(t, c)) == 0 {
		t.Fatalf("a later millisecond continued the last one's sequence: %s after %s", c, b)
	}
	early := contract.NewULID(at.Add(-time.Hour))
	if early >= a {
		t.Fatalf("a ULID an hour earlier (%s) does not sort before %s", early, a)
	}
	d := contract.NewULID(at.Add(time.Millisecond))
	if new(big.Int).Add(ulidRandom(t, c), one).Cmp(ulidRandom(t, d)) != 0 {
		t.Fatalf("an earlier time broke the sequence of the last millisecond: %s then %s", c, d)
	}
}
