package contract_test

import (
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// TestStoredKeyClaim states the leased key's rules: another body is a
// conflict even after the lease, a complete key answers its result (an
// empty one too), a claim is in progress up to and including its lease's
// last microsecond, and taken over only after it.
func TestStoredKeyClaim(t *testing.T) {
	const claimedAt, lease = int64(1_000_000), time.Second
	running := contract.StoredKey{BodyHash: "h1", ClaimedAt: claimedAt}
	cases := []struct {
		name     string
		k        contract.StoredKey
		hash     string
		now      int64
		want     contract.KeyClaim
		takeOver bool
		conflict bool
	}{
		{"same body, lease running", running, "h1", claimedAt + 1, contract.KeyClaim{}, false, false},
		{"same body, last microsecond of the lease", running, "h1", claimedAt + lease.Microseconds(), contract.KeyClaim{}, false, false},
		{"same body, lease over", running, "h1", claimedAt + lease.Microseconds() + 1, contract.KeyClaim{}, true, false},
		{"other body, lease running", running, "h2", claimedAt, contract.KeyClaim{}, false, true},
		{"other body, lease over", running, "h2", claimedAt + 10*lease.Microseconds(), contract.KeyClaim{}, false, true},
		{"complete", contract.StoredKey{BodyHash: "h1", Done: true, Result: []byte(`{"ok":true}`), ClaimedAt: claimedAt}, "h1", claimedAt + 10*lease.Microseconds(), contract.KeyClaim{Result: []byte(`{"ok":true}`)}, false, false},
		{"complete, other body", contract.StoredKey{BodyHash: "h1", Done: true, Result: []byte(`{}`)}, "h2", 0, contract.KeyClaim{}, false, true},
	}
	for _, c := range cases {
		got, takeOver, err := c.k.Claim("key-00000001", c.hash, c.now, lease)
		if c.conflict {
			if contract.KindOf(err) != contract.KindConflict || contract.AsError(err).Code != "idempotency_key_conflict" {
				t.Errorf("%s: err = %v, want idempotency_key_conflict", c.name, err)
			}
			if takeOver || got.Claimed || got.Result != nil {
				t.Errorf("%s: a conflict also gave %+v, takeOver %v", c.name, got, takeOver)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if takeOver != c.takeOver || got.Claimed || string(got.Result) != string(c.want.Result) || got.InProgress() != (c.want.Result == nil) {
			t.Errorf("%s: got %+v takeOver %v, want %+v takeOver %v", c.name, got, takeOver, c.want, c.takeOver)
		}
	}

	// A complete key whose stored result is empty is complete, not in
	// progress: a retry gets the empty result rather than waiting.
	got, _, err := contract.StoredKey{BodyHash: "h1", Done: true}.Claim("key-00000001", "h1", 0, lease)
	if err != nil || got.InProgress() || got.Result == nil || len(got.Result) != 0 {
		t.Errorf("complete with an empty result: %+v, %v", got, err)
	}
}
