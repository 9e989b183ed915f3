package contract

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
