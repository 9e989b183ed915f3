package store

// What the external tests read of a store's leases.

// WaitRefills waits for the background lease top-ups in flight.
func (s *ShimSpend) WaitRefills() {
	if s.book != nil {
		s.book.refills.Wait()
	}
}

// LeaseWaits is how many lease writes an attempt waited for.
func (s *ShimSpend) LeaseWaits() int64 {
	if s.book == nil {
		return 0
	}
	return s.book.writes.Load()
}
