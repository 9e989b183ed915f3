package keyowner

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestOneOwnerAtATime: of many requests for one key, one owns it at a time;
// the others wait on the owner's channel and take their turn after it, and
// other keys are independent.
func TestOneOwnerAtATime(t *testing.T) {
	var s Set
	var owners, max atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			for {
				ch, owner := s.Acquire("k")
				if !owner {
					<-ch
					continue
				}
				n := owners.Add(1)
				if n > max.Load() {
					max.Store(n)
				}
				own := fmt.Sprint("own-", i)
				if ch2, other := s.Acquire(own); !other {
					t.Errorf("%s was held while k was owned", own)
				} else {
					s.Release(own, ch2)
				}
				owners.Add(-1)
				s.Release("k", ch)
				return
			}
		})
	}
	wg.Wait()
	if max.Load() != 1 {
		t.Errorf("%d owners of one key at once", max.Load())
	}
	if len(s.keys) != 0 {
		t.Errorf("keys left: %v", s.keys)
	}
}
