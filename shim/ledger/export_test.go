package ledger

import (
	"context"
	"time"
)

// What the external tests read of a store's leases.

// WaitRefills waits for the background lease top-ups in flight.
func (s *Ledger) WaitRefills() {
	if s.book != nil {
		s.book.refills.Wait()
	}
}

// LeaseWaits is how many lease writes an attempt waited for.
func (s *Ledger) LeaseWaits() int64 {
	if s.book == nil {
		return 0
	}
	return s.book.writes.Load()
}

// HoldJournal keeps this store's deferred settlements pending until
// something asks for them (a read of the spend or a total, a return of the
// leases, Close).
func (s *Ledger) HoldJournal() {
	j := journalOf(s.db)
	j.mu.Lock()
	j.batch, j.delay = 1<<30, time.Hour
	j.mu.Unlock()
}

// DropJournal forgets the deferred settlements not written yet, as a
// process killed before writing them would.
func (s *Ledger) DropJournal() {
	j := journalOf(s.db)
	j.mu.Lock()
	j.pending, j.n = nil, 0
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	j.mu.Unlock()
}

// HoldsListening reports whether this store's holds listener is up.
func (s *Ledger) HoldsListening() bool {
	b := &processOf(s.db).holds
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.listening
}

// FlushRates writes this process's rate-window tokens and gives back its
// unused slices now.
func (s *Ledger) FlushRates() error { return ratesOf(s.db).flush(context.Background(), false) }

// FlushRatesTimed is the flush the timer runs: a slice admitted from since
// the last flush is kept.
func (s *Ledger) FlushRatesTimed() error { return ratesOf(s.db).flush(context.Background(), true) }

// The lease book's times, for tests that state its rules at their edges.
const (
	LeaseMaxAge = leaseMaxAge
	TightFor    = tightFor
	LeaseIdle   = leaseIdle
)

// HoldsHeard is closed once this store's holds listener next starts
// listening or hears a notification (after it dropped both copies).
func (s *Ledger) HoldsHeard() <-chan struct{} {
	b := &processOf(s.db).holds
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.heard == nil {
		b.heard = make(chan struct{})
	}
	return b.heard
}

// RatesFlushed is closed once this store's rate flush timer next has
// fired and its flush ended.
func (s *Ledger) RatesFlushed() <-chan struct{} {
	b := ratesOf(s.db)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flushed == nil {
		b.flushed = make(chan struct{})
	}
	return b.flushed
}
