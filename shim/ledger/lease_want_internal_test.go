package ledger

import (
	"testing"
	"time"
)

// TestLeaseFollowsTheRate: a lease asks for 16 attempts of its largest
// amount when attempts come slowly, for a second's worth of what they ask
// when they come fast (so its top-up, begun at half, lands before it runs
// out even with the database milliseconds away), and never for more than
// 1,024 attempts.
func TestLeaseFollowsTheRate(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		name   string
		asked  int64 // in attempts of 100 since the last write
		since  time.Duration
		want   int64
		reason string
	}{
		{"new", 0, 0, 16 * 100, "no write yet: 16 attempts"},
		{"slow", 4, time.Second, 16 * 100, "4 a second: 16 attempts"},
		{"fast", 40, 100 * time.Millisecond, 400 * 100, "400 a second: a second's worth"},
		{"burst", 1000, time.Millisecond, 1024 * 100, "a million a second: the cap"},
	} {
		l := &lease{maxSeen: 100, asked: c.asked * 100}
		if c.since > 0 {
			l.written = now.Add(-c.since)
		}
		if got := l.want(now); got != c.want {
			t.Errorf("%s: want() = %d, want %d (%s)", c.name, got, c.want, c.reason)
		}
	}
}
