// Package keyowner makes one request of a process the owner of a key (an
// idempotency key) while the others wait for it: the process-local half of
// a claim whose other half is a row in the store, shared by the write routes'
// Idempotency-Key (server) and the executor's tick keys.
package keyowner

import "sync"

// Set is the keys requests of this process own. The zero Set is empty.
type Set struct {
	mu   sync.Mutex
	keys map[string]chan struct{}
}

// Acquire makes the caller the owner of k (owner true), or returns the
// channel closed when the current owner releases it.
func (s *Set) Acquire(k string) (wait chan struct{}, owner bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.keys[k]; ok {
		return ch, false
	}
	if s.keys == nil {
		s.keys = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	s.keys[k] = ch
	return ch, true
}

// Release ends the ownership Acquire gave (ch is the channel it returned)
// and wakes the waiters.
func (s *Set) Release(k string, ch chan struct{}) {
	s.mu.Lock()
	delete(s.keys, k)
	s.mu.Unlock()
	close(ch)
}
