package contract

import "time"

// KeyClaim is the state of a leased idempotency key as a claim found it:
// claimed by this caller (run, then complete or release), complete (Result
// holds the stored result), or neither: another caller holds it and is
// running. The store makes it (store.DB.ClaimLeasedKey); the server's
// write routes read it.
type KeyClaim struct {
	Claimed bool
	Result  []byte
}

// InProgress reports whether another caller holds the key and has stored
// no result yet.
func (c KeyClaim) InProgress() bool { return !c.Claimed && c.Result == nil }

// StoredKey is a leased idempotency key as its row holds it: the hash of
// the body that claimed it, its result once complete, and when it was
// claimed (or last taken over), in microseconds since the epoch.
type StoredKey struct {
	BodyHash  string
	Done      bool   // a result is stored
	Result    []byte // the stored result when Done
	ClaimedAt int64
}

// Claim is what a claim of key with bodyHash, made at now (microseconds),
// gets from the key already stored: a conflict Error (code
// idempotency_key_conflict) when another body claimed it; its result when
// it is complete; in progress (the zero KeyClaim) while the claim's lease
// runs; and after the lease, takeOver: the caller moves ClaimedAt to now
// with one conditional write that names ClaimedAt, and owns the key when
// that write changes the row, so one taker wins.
func (k StoredKey) Claim(key, bodyHash string, now int64, lease time.Duration) (c KeyClaim, takeOver bool, err error) {
	switch {
	case k.BodyHash != bodyHash:
		return KeyClaim{}, false, Conflictf("idempotency_key_conflict", "idempotency key %q was already used with a different request", key)
	case k.Done:
		return KeyClaim{Result: k.resultBytes()}, false, nil
	case now-k.ClaimedAt <= lease.Microseconds():
		return KeyClaim{}, false, nil
	}
	return KeyClaim{}, true, nil
}

// resultBytes is Result, never nil, so a complete key's claim is not in
// progress even when its result is empty.
func (k StoredKey) resultBytes() []byte {
	if k.Result == nil {
		return []byte{}
	}
	return k.Result
}
